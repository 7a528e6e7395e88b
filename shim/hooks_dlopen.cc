// hooks_dlopen: dlopen as the program calls it. While the shim's jemalloc
// serves the heap, a library opened with RTLD_DEEPBIND (PHP's extensions,
// some plugin hosts) would bind malloc and free to glibc's ahead of the
// shim's and free jemalloc's blocks into glibc's heap: the process crashes.
// So that flag is dropped there, and only there (docs/ALLOCATOR.md). The
// call is passed on as a jump, so the loader sees the program's own
// caller (its RUNPATH, its namespace), not the shim.
#include <dlfcn.h>

#include "alloc_choice.h"
#include "export.h"
#include "glibc_compat.h"
#include "real.h"

EXPORT void* dlopen(const char* file, int flags) {
  // The stack walks' table of objects (before glibc 2.35) gains what this
  // call loads at the next refresh, or when a walk first meets it
  // (glibc_compat.h): this call must stay a jump.
  glibc_compat::refresh_objects();
  glibc_compat::mark_stale();
  if ((flags & RTLD_DEEPBIND) && alloc_choice::mode() == alloc_choice::kJemalloc) flags &= ~RTLD_DEEPBIND;
  return real::dlopen()(file, flags);
}
