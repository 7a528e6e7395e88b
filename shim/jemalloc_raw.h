// jemalloc_raw: jemalloc's own mallctl entry points, renamed in the build's
// copy of Debian's archive (Makefile). The exported mallctl and mallctlbymib
// are the shim's filter for the program (malloc_api.cc); the shim itself
// must never go through that filter, so it calls these.
#pragma once
#include <stddef.h>
#include <stdint.h>

extern "C" {
int profshim_je_mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen);
int profshim_je_mallctlbymib(const size_t* mib, size_t miblen, void* oldp, size_t* oldlenp, void* newp,
                             size_t newlen);
int mallctlnametomib(const char* name, size_t* mibp, size_t* miblenp);
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
