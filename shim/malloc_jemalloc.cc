// malloc_jemalloc: jemalloc's non-standard API (mallocx and the rest) as
// the program sees it. With the heap profiled the shim's jemalloc answers,
// so a program linked with -ljemalloc binds these to the shim first and one
// jemalloc serves both its malloc and its mallocx. Otherwise the next
// definition answers (the program's own libjemalloc), and where there is
// none, the calls are carried out with the next malloc: code that looks
// these names up weakly finds them defined in the shim, and must get
// memory its free() takes and a mallctl that says "no such name" (ENOENT),
// which is how such code tells jemalloc is not there.
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_choice.h"
#include "export.h"
#include "jemalloc_raw.h"
#include "wrappers.h"

using alloc_choice::kJemalloc;
using alloc_choice::mode;
using alloc_choice::next;

namespace {

// jemalloc's flags (jemalloc/jemalloc.h): the low six bits carry log2 of
// the alignment, bit 6 asks for zeroed memory.
size_t alignment_of(int flags) { return (flags & 0x3f) ? size_t(1) << (flags & 0x3f) : 0; }
bool zeroed(int flags) { return flags & 0x40; }

void* emulated_alloc(size_t n, int flags) {
  size_t align = alignment_of(flags);
  void* p = nullptr;
  if (align > 16) {
    if (posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, n) != 0) p = nullptr;
  } else {
    p = malloc(n);
  }
  if (p && zeroed(flags)) memset(p, 0, n);
  return p;
}

}  // namespace

EXPORT_ALLOC void* mallocx(size_t n, int flags) {
  if (mode() == kJemalloc) return profshim_je_mallocx(n, flags);
  if (alloc_choice::optional().mallocx) {
    auto r = alloc_choice::optional().mallocx(n, flags);
    PROFSHIM_KEEP_FRAME(r);
    return r;
  }
  return emulated_alloc(n, flags);
}

EXPORT_ALLOC void* rallocx(void* p, size_t n, int flags) {
  if (alloc_choice::is_bootstrap(p)) return realloc(p, n);
  if (mode() == kJemalloc) return profshim_je_rallocx(p, n, flags);
  if (alloc_choice::optional().rallocx) {
    auto r = alloc_choice::optional().rallocx(p, n, flags);
    PROFSHIM_KEEP_FRAME(r);
    return r;
  }
  size_t old = malloc_usable_size(p);
  void* q = emulated_alloc(n, flags & ~0x40);
  if (!q) return nullptr;
  memcpy(q, p, old < n ? old : n);
  if (zeroed(flags) && n > old) memset(static_cast<char*>(q) + old, 0, n - old);
  free(p);
  return q;
}

// In place: the next malloc has no such call, so the block keeps its size.
EXPORT_ALLOC size_t xallocx(void* p, size_t n, size_t extra, int flags) {
  if (mode() == kJemalloc) return profshim_je_xallocx(p, n, extra, flags);
  if (alloc_choice::optional().xallocx) {
    auto r = alloc_choice::optional().xallocx(p, n, extra, flags);
    PROFSHIM_KEEP_FRAME(r);
    return r;
  }
  return malloc_usable_size(p);
}

EXPORT_ALLOC size_t sallocx(const void* p, int flags) {
  if (mode() == kJemalloc) return profshim_je_sallocx(p, flags);
  if (alloc_choice::optional().sallocx) {
    auto r = alloc_choice::optional().sallocx(p, flags);
    PROFSHIM_KEEP_FRAME(r);
    return r;
  }
  return malloc_usable_size(const_cast<void*>(p));
}

EXPORT_ALLOC void dallocx(void* p, int flags) {
  if (alloc_choice::is_bootstrap(p)) return;
  if (mode() == kJemalloc) return profshim_je_dallocx(p, flags);
  if (alloc_choice::optional().dallocx) {
    alloc_choice::optional().dallocx(p, flags);
    PROFSHIM_KEEP_FRAME_VOID();
    return;
  }
  free(p);
}

EXPORT_ALLOC void sdallocx(void* p, size_t n, int flags) {
  if (alloc_choice::is_bootstrap(p)) return;
  if (mode() == kJemalloc) return profshim_je_sdallocx(p, n, flags);
  if (alloc_choice::optional().sdallocx) {
    alloc_choice::optional().sdallocx(p, n, flags);
    PROFSHIM_KEEP_FRAME_VOID();
    return;
  }
  free(p);
}

// What mallocx(n, flags) would give at least; 0 where it would fail, as
// jemalloc answers.
EXPORT_ALLOC size_t nallocx(size_t n, int flags) {
  if (mode() == kJemalloc) return profshim_je_nallocx(n, flags);
  if (alloc_choice::optional().nallocx) {
    auto r = alloc_choice::optional().nallocx(n, flags);
    PROFSHIM_KEEP_FRAME(r);
    return r;
  }
  size_t align = alignment_of(flags) > 16 ? alignment_of(flags) : 16;
  size_t rounded = (n + align - 1) & ~(align - 1);
  return rounded < n || rounded > (SIZE_MAX >> 1) ? 0 : rounded;
}

EXPORT_ALLOC int mallctlnametomib(const char* name, size_t* mib, size_t* len) {
  if (mode() == kJemalloc) return profshim_je_mallctlnametomib(name, mib, len);
  if (alloc_choice::optional().mallctlnametomib) {
    auto r = alloc_choice::optional().mallctlnametomib(name, mib, len);
    PROFSHIM_KEEP_FRAME(r);
    return r;
  }
  return ENOENT;
}

EXPORT_ALLOC void malloc_stats_print(void (*write_cb)(void*, const char*), void* opaque, const char* opts) {
  if (mode() == kJemalloc) return profshim_je_malloc_stats_print(write_cb, opaque, opts);
  if (alloc_choice::optional().malloc_stats_print) alloc_choice::optional().malloc_stats_print(write_cb, opaque, opts);
  PROFSHIM_KEEP_FRAME_VOID();
}
