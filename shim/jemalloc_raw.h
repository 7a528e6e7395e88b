// jemalloc_raw: jemalloc's own entry points, renamed profshim_je_* in the
// build's copy of Debian's archive (Makefile). The exported names are the
// shim's: they pass each call to the allocator chosen for the image
// (allocator.cc, malloc_api.cc), and the exported mallctl and mallctlbymib
// filter the program's writes to the profile's switches; the shim itself
// never goes through that filter, so it calls these.
#pragma once
#include <stddef.h>
#include <stdint.h>

extern "C" {
int profshim_je_mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen);
int profshim_je_mallctlbymib(const size_t* mib, size_t miblen, void* oldp, size_t* oldlenp, void* newp,
                             size_t newlen);
int profshim_je_mallctlnametomib(const char* name, size_t* mibp, size_t* miblenp);
void* profshim_je_malloc(size_t);
void* profshim_je_calloc(size_t, size_t);
void* profshim_je_realloc(void*, size_t);
void profshim_je_free(void*);
int profshim_je_posix_memalign(void**, size_t, size_t);
void* profshim_je_aligned_alloc(size_t, size_t);
void* profshim_je_memalign(size_t, size_t);
void* profshim_je_valloc(size_t);
size_t profshim_je_malloc_usable_size(void*);
void* profshim_je_mallocx(size_t, int);
void* profshim_je_rallocx(void*, size_t, int);
size_t profshim_je_xallocx(void*, size_t, size_t, int);
size_t profshim_je_sallocx(const void*, int);
void profshim_je_dallocx(void*, int);
void profshim_je_sdallocx(void*, size_t, int);
size_t profshim_je_nallocx(size_t, int);
void profshim_je_malloc_stats_print(void (*)(void*, const char*), void*, const char*);
}

namespace jemalloc_raw {

inline int ctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen) {
  return profshim_je_mallctl(name, oldp, oldlenp, newp, newlen);
}

// A size_t statistic, 0 if jemalloc does not know the name.
inline int ctl_by_mib(const size_t* mib, size_t miblen, void* oldp, size_t* oldlenp, void* newp, size_t newlen) {
  return profshim_je_mallctlbymib(mib, miblen, oldp, oldlenp, newp, newlen);
}

inline size_t stat(const char* name) {
  size_t v = 0, sz = sizeof v;
  return ctl(name, &v, &sz, nullptr, 0) == 0 ? v : 0;
}

// Statistics are a snapshot taken at the last epoch; this takes a new one.
inline void refresh() {
  uint64_t e = 1;
  size_t sz = sizeof e;
  ctl("epoch", &e, &sz, &e, sz);
}

}  // namespace jemalloc_raw
