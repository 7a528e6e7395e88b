// heap_advice: the shim's jemalloc under a seccomp filter that kills madvise
// (heap.h, keep_freed). jemalloc returns freed pages with madvise: its
// decay purges dirty and muzzy extents as time passes, on the program's own
// free() and malloc(); a thread's exit purges its arena whole when no other
// thread is bound to it (tcache.c's tcache_destroy, whatever the decay);
// a zeroed allocation (calloc) that reuses a freed extent zeroes it with
// MADV_DONTNEED (ehooks.c's ehooks_default_zero_impl). Without the shim
// glibc's malloc makes none of these calls on those paths, and the program
// lives under its filter. With the filter in force every one of them would
// end the program (SIGSYS).
#include <errno.h>
#include <sys/mman.h>
#include <sys/types.h>

#include "alloc_choice.h"
#include "heap.h"
#include "jemalloc_raw.h"
#include "sys.h"

// jemalloc's calls to madvise, renamed to this in the build's copy of
// Debian's archive (Makefile). Once advice is forbidden the call fails as a
// seccomp errno would, without reaching the kernel: jemalloc takes a
// failed purge as not done (the pages stay, and are not counted as
// zeroed: a calloc that reuses them gets memset). May run before the
// shim's constructor (jemalloc boots on the first malloc).
extern "C" __attribute__((visibility("hidden"))) int profshim_je_madvise(void* addr, size_t len, int advice) {
  if (sys::advice_forbidden()) {
    errno = EPERM;
    return -1;
  }
  return madvise(addr, len, advice);
}

namespace heap {

void keep_freed() {
  if (!alloc_choice::jemalloc()) return;
  // Decay off (-1): arenas made from now on (a thread's first malloc, the
  // huge arena of blocks past 8 MiB: jemalloc 5.3 gives that one a decay
  // of 0 only where the default is above 0), then each one made already
  // (arena.<MALLCTL_ARENAS_ALL> is refused for these: EFAULT). Without a
  // decay nothing is purged as time passes, and an extent past the oversize
  // threshold is not purged at its free either (extent_may_force_decay).
  ssize_t never = -1;
  jemalloc_raw::ctl("arenas.dirty_decay_ms", nullptr, nullptr, &never, sizeof never);
  jemalloc_raw::ctl("arenas.muzzy_decay_ms", nullptr, nullptr, &never, sizeof never);
  unsigned n = 0;
  size_t sz = sizeof n;
  if (jemalloc_raw::ctl("arenas.narenas", &n, &sz, nullptr, 0) != 0) return;
  for (const char* which : {"arena.0.dirty_decay_ms", "arena.0.muzzy_decay_ms"}) {
    size_t mib[3], len = 3;
    if (profshim_je_mallctlnametomib(which, mib, &len) != 0) continue;
    for (unsigned i = 0; i < n; ++i) {
      mib[1] = i;  // an index no arena was made at yet answers EFAULT
      jemalloc_raw::ctl_by_mib(mib, len, nullptr, nullptr, &never, sizeof never);
    }
  }
}

}  // namespace heap
