// allocator: the parts of malloc's interface that the shim serves beyond
// what jemalloc exports itself, and the options jemalloc boots with.
// jemalloc (libjemalloc_pic.a, linked whole) provides malloc, calloc,
// realloc, free, posix_memalign, aligned_alloc, memalign, valloc and
// malloc_usable_size; C++ new/delete reach them through libstdc++.
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <malloc.h>

#include "wrappers.h"

#define EXPORT extern "C" __attribute__((visibility("default"))) PROFSHIM_ALLOC

// jemalloc reads these before any constructor of ours runs (at its first
// malloc). conf_2_conf_harder is applied after MALLOC_CONF, so a program's
// MALLOC_CONF=prof:false, meant for another jemalloc, cannot switch our heap
// profile off. Sampling starts inactive: what is allocated before our
// constructor is the loader's, other libraries' and the shim's own static
// initialisers' (its libstdc++'s emergency pool), not the program's; setup
// switches it on. The program's own static initialisers run after it.
//
extern "C" {
__attribute__((visibility("hidden"))) const char* malloc_conf = "prof_active:false,lg_prof_sample:19";
__attribute__((visibility("hidden"))) const char* malloc_conf_2_conf_harder =
    "prof:true,prof_accum:true,prof_final:false,prof_leak:false,prof_gdump:false,lg_prof_interval:-1";
}

// glibc's own reallocarray and pvalloc would reach glibc's allocator with a
// jemalloc pointer; they must be ours too.
EXPORT void* reallocarray(void* p, size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(p, bytes);
}

EXPORT void* pvalloc(size_t size) {
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t rounded = (size + page - 1) & ~(page - 1);
  if (rounded < size) {
    errno = ENOMEM;
    return nullptr;
  }
  return memalign(page, rounded ? rounded : page);
}

// Old code calls the __libc_ names directly; they must not reach glibc's
// heap with our pointers.
EXPORT void* __libc_malloc(size_t n) { return malloc(n); }
EXPORT void* __libc_calloc(size_t n, size_t s) { return calloc(n, s); }
EXPORT void* __libc_realloc(void* p, size_t n) { return realloc(p, n); }
EXPORT void __libc_free(void* p) { free(p); }
EXPORT void* __libc_memalign(size_t a, size_t n) { return memalign(a, n); }
EXPORT void* __libc_valloc(size_t n) { return valloc(n); }
EXPORT void* __libc_pvalloc(size_t n) { return pvalloc(n); }
EXPORT void cfree(void* p) { free(p); }
