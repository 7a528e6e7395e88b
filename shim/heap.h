// heap: control of the jemalloc heap profiler that lives inside the shim,
// through mallctl only: switching sampling on and off, the sample rate, the
// dump, and the allocator's own figures. No parsing here (heap_dump.h).
// Not signal-safe.
#pragma once
#include <stdint.h>
#include <string>

namespace heap {

// True if jemalloc was built with profiling and it is enabled (opt.prof),
// and a libjemalloc the program loaded speaks the same API.
bool available(std::string* err);
// Starts sampling at a mean of 2^lg_sample bytes (prof.reset if it differs
// from the rate jemalloc booted with). Allocations from before this call
// stay in the profile when the rate is the default. From then on the
// program's mallctl cannot change the profiler (malloc_api.h).
bool start(unsigned lg_sample, std::string* err);
// prof.reset at the current rate: the counts start again from now (a fork
// child that hands its heap over counts its own allocations only, forks.h),
// and the sampler's draws and countdown move by amounts drawn from seed
// (the child's pid: siblings do not sample in step).
void reset_counts(uint64_t seed);
// Whether start() succeeded in this process (a fork child inherits it).
bool started();
// prof.active: whether new allocations are sampled at all (process-wide).
void set_active(bool on);
// thread.prof.active: whether the calling thread's allocations are sampled.
void set_thread_active(bool on);
// The same, returning what it was (to put it back).
bool swap_thread_active(bool on);
// Moves the calling thread's allocations to an arena of its own.
void use_private_arena();
// On a thread that use_private_arena moved (else nothing): the pages its
// arena holds free go back to the system now, not at jemalloc's decay
// (10 s). The stop calls it between modules: what libdw allocated for one
// and freed is otherwise still resident, under the next one's.
void trim_private_arena();
// Binds the calling thread to arena 0, the main thread's. jemalloc purges
// an arena whole when the last thread bound to it exits (tcache_destroy)
// and gives a new thread the arena with the fewest threads: a program that
// starts threads one after another had each alone on an arena that it
// emptied at exit and the next faulted back in (create+join of allocating
// threads: 2.1x plain CPU). hooks.cc binds a thread here when it is the only
// one the program has started that is alive; threads that run together keep
// jemalloc's spreading over its arenas, and their concurrency.
void share_main_arena();
// jemalloc's heap_v2 dump of the live and cumulative samples, as text.
bool dump(std::string* text, std::string* err);
// The name dump() gives jemalloc, and the descriptor it stands for on the
// dumping thread (plus one; 0: none): jemalloc's creat() of that name is
// answered with a duplicate (heap_dump_maps.cc), so the dump needs no path,
// and no /proc, whatever root the program has.
constexpr char kDumpName[] = "profshim: the heap dump's memfd";
extern thread_local int t_dump_fd;
// Bytes the program holds now (stats.allocated), exact.
uint64_t allocated();
// Returns the allocator's free memory to the system, address space and all
// (jemalloc: every arena purged, which unmaps when it boots with
// retain:false, alloc_choice.cc; the next allocator: malloc_trim). True if
// it could try.
bool give_back();
// Before a seccomp filter that kills madvise goes in (sandbox.h), while
// jemalloc serves: jemalloc stops returning freed memory to the system as
// time passes (its decay off in every arena, heap_advice.cc), and each
// madvise it would still make fails without reaching the kernel
// (sys::forbid_advice). Freed memory is kept for reuse, not returned.
void keep_freed();
// True if malloc as the program sees it is the shim's (not a static copy of
// the program's own allocator or another preload).
bool serves_malloc();

}  // namespace heap
