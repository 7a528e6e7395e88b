// allocator: the malloc family the program calls, each passed to the
// allocator chosen for this image (alloc_choice.h), and the options the
// shim's jemalloc boots with. jemalloc's own malloc, free and the rest are
// renamed profshim_je_* in the build's copy of Debian's archive (Makefile),
// so nothing reaches them but these functions and the shim.
// When the next allocator serves, each function makes a real call, not a
// jump: its frame, in the allocator's section (wrappers.h), is how a stop
// knows that a thread it interrupted is inside malloc and holds its locks.
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "alloc_choice.h"
#include "export.h"
#include "jemalloc_raw.h"
#include "wrappers.h"

#define KEEP_FRAME PROFSHIM_KEEP_FRAME
#define KEEP_FRAME_VOID PROFSHIM_KEEP_FRAME_VOID

// jemalloc reads these when it boots, at the shim's first call into it:
// only in an image whose heap is profiled (its constructor, which would
// boot it in every process at load, is left out of the build's copy). conf_2_conf_harder is applied after
// MALLOC_CONF, so a program's MALLOC_CONF=prof:false, meant for another
// jemalloc, cannot switch our heap profile off. Sampling starts inactive:
// what is allocated before our constructor is the loader's, other
// libraries' and the shim's own static initialisers' (its libstdc++'s
// emergency pool), not the program's; setup switches it on. The program's
// own static initialisers run after it.
extern "C" {
__attribute__((visibility("hidden"))) const char* malloc_conf = "prof_active:false,lg_prof_sample:19";
// Under a limit on address space or data (ulimit -v, -d) what jemalloc
// frees must leave the address space, or a program that freed everything
// still cannot map a stack for the stop (alloc_choice.cc picks this).
__attribute__((visibility("hidden"))) extern const char profshim_conf_limited[] =
    "prof_active:false,lg_prof_sample:19,retain:false";
__attribute__((visibility("hidden"))) const char* malloc_conf_2_conf_harder =
    "prof:true,prof_accum:true,prof_final:false,prof_leak:false,prof_gdump:false,lg_prof_interval:-1";
}

using alloc_choice::kJemalloc;
using alloc_choice::kNext;
using alloc_choice::mode;
using alloc_choice::next;

namespace {

// While the choice is being made: the bootstrap arena.
void* boot_realloc(void* p, size_t n) {
  void* q = alloc_choice::bootstrap_alloc(n, 16);
  if (q && p) {
    size_t old = alloc_choice::bootstrap_size(p);
    memcpy(q, p, old < n ? old : n);
  }
  return q;
}

// A block from the bootstrap arena, moved to the chosen allocator.
PROFSHIM_ALLOC void* move_out(void* p, size_t n) {
  void* q = mode() == kJemalloc ? profshim_je_malloc(n) : next().malloc(n);
  if (q) {
    size_t old = alloc_choice::bootstrap_size(p);
    memcpy(q, p, old < n ? old : n);
  }
  return q;
}

size_t page_size() {
  static size_t page;
  if (!page) page = size_t(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

EXPORT_ALLOC void* malloc(size_t n) {
  switch (mode()) {
    case kJemalloc: return profshim_je_malloc(n);
    case kNext: { void* r = next().malloc(n); KEEP_FRAME(r); return r; }
    default: return alloc_choice::bootstrap_alloc(n, 16);
  }
}

EXPORT_ALLOC void* calloc(size_t a, size_t b) {
  switch (mode()) {
    case kJemalloc: return profshim_je_calloc(a, b);
    case kNext: { void* r = next().calloc(a, b); KEEP_FRAME(r); return r; }
    default: {
      size_t n;
      if (__builtin_mul_overflow(a, b, &n)) return nullptr;
      return alloc_choice::bootstrap_alloc(n, 16);  // static memory, zero
    }
  }
}

EXPORT_ALLOC void* realloc(void* p, size_t n) {
  if (alloc_choice::is_bootstrap(p)) return mode() == alloc_choice::kUndecided ? boot_realloc(p, n) : move_out(p, n);
  switch (mode()) {
    case kJemalloc: return profshim_je_realloc(p, n);
    case kNext: { void* r = next().realloc(p, n); KEEP_FRAME(r); return r; }
    default: return boot_realloc(p, n);
  }
}

EXPORT_ALLOC void free(void* p) {
  if (alloc_choice::is_bootstrap(p)) return;
  switch (mode()) {
    case kJemalloc: profshim_je_free(p); return;
    case kNext: next().free(p); KEEP_FRAME_VOID(); return;
    default: return;  // only bootstrap blocks exist yet
  }
}

EXPORT_ALLOC int posix_memalign(void** out, size_t align, size_t n) {
  switch (mode()) {
    case kJemalloc: return profshim_je_posix_memalign(out, align, n);
    case kNext: { int r = next().posix_memalign(out, align, n); KEEP_FRAME(r); return r; }
    default:
      if (align < sizeof(void*) || (align & (align - 1))) return EINVAL;
      return (*out = alloc_choice::bootstrap_alloc(n, align)) ? 0 : ENOMEM;
  }
}

EXPORT_ALLOC void* aligned_alloc(size_t align, size_t n) {
  switch (mode()) {
    case kJemalloc: return profshim_je_aligned_alloc(align, n);
    case kNext: { void* r = next().aligned_alloc(align, n); KEEP_FRAME(r); return r; }
    default: return alloc_choice::bootstrap_alloc(n, align);
  }
}

EXPORT_ALLOC void* memalign(size_t align, size_t n) {
  switch (mode()) {
    case kJemalloc: return profshim_je_memalign(align, n);
    case kNext: { void* r = next().memalign(align, n); KEEP_FRAME(r); return r; }
    default: return alloc_choice::bootstrap_alloc(n, align);
  }
}

EXPORT_ALLOC void* valloc(size_t n) {
  switch (mode()) {
    case kJemalloc: return profshim_je_valloc(n);
    case kNext: { void* r = next().valloc(n); KEEP_FRAME(r); return r; }
    default: return alloc_choice::bootstrap_alloc(n, page_size());
  }
}

EXPORT_ALLOC size_t malloc_usable_size(void* p) {
  if (alloc_choice::is_bootstrap(p)) return alloc_choice::bootstrap_size(p);
  switch (mode()) {
    case kJemalloc: return profshim_je_malloc_usable_size(p);
    case kNext: { size_t r = next().malloc_usable_size(p); KEEP_FRAME(r); return r; }
    default: return 0;
  }
}

// jemalloc has no pvalloc and reallocarray; glibc's own would reach glibc's
// heap with a jemalloc pointer.
EXPORT_ALLOC void* pvalloc(size_t n) {
  if (mode() == kNext && next().pvalloc) { void* r = next().pvalloc(n); KEEP_FRAME(r); return r; }
  size_t rounded = (n + page_size() - 1) & ~(page_size() - 1);
  if (rounded < n) {
    errno = ENOMEM;
    return nullptr;
  }
  return memalign(page_size(), rounded ? rounded : page_size());
}

EXPORT_ALLOC void* reallocarray(void* p, size_t n, size_t size) {
  if (mode() == kNext && next().reallocarray && !alloc_choice::is_bootstrap(p)) {
    void* r = next().reallocarray(p, n, size);
    KEEP_FRAME(r);
    return r;
  }
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(p, bytes);
}

// Old code calls the __libc_ names directly: with jemalloc serving they
// must not reach glibc's heap with its pointers; otherwise they are the
// next definition's, as without the shim.
EXPORT_ALLOC void* __libc_malloc(size_t n) {
  if (mode() == kNext) { void* r = next().libc_malloc(n); KEEP_FRAME(r); return r; }
  return malloc(n);
}
EXPORT_ALLOC void* __libc_calloc(size_t n, size_t s) {
  if (mode() == kNext) { void* r = next().libc_calloc(n, s); KEEP_FRAME(r); return r; }
  return calloc(n, s);
}
EXPORT_ALLOC void* __libc_realloc(void* p, size_t n) {
  if (mode() == kNext && !alloc_choice::is_bootstrap(p)) { void* r = next().libc_realloc(p, n); KEEP_FRAME(r); return r; }
  return realloc(p, n);
}
EXPORT_ALLOC void __libc_free(void* p) {
  if (mode() == kNext && !alloc_choice::is_bootstrap(p)) { next().libc_free(p); KEEP_FRAME_VOID(); return; }
  free(p);
}
EXPORT_ALLOC void* __libc_memalign(size_t a, size_t n) {
  if (mode() == kNext) { void* r = next().libc_memalign(a, n); KEEP_FRAME(r); return r; }
  return memalign(a, n);
}
EXPORT_ALLOC void* __libc_valloc(size_t n) {
  if (mode() == kNext) { void* r = next().libc_valloc(n); KEEP_FRAME(r); return r; }
  return valloc(n);
}
EXPORT_ALLOC void* __libc_pvalloc(size_t n) {
  if (mode() == kNext && next().libc_pvalloc) { void* r = next().libc_pvalloc(n); KEEP_FRAME(r); return r; }
  return pvalloc(n);
}
EXPORT_ALLOC void cfree(void* p) {
  if (mode() == kNext && !alloc_choice::is_bootstrap(p)) { alloc_choice::optional().cfree(p); KEEP_FRAME_VOID(); return; }
  free(p);
}
