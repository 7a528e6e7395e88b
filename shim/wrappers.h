// wrappers: address ranges the stop needs to clean stacks: the shim's frames
// that stand between the program's own frames (the wrapper around main, the
// thread-start trampoline), which never show in a profile, and the
// allocator, where every heap stack is cut at the allocation call.
#pragma once
#include <stdint.h>

#define PROFSHIM_WRAPPER __attribute__((section("profshim_wrap"), noinline, used))
// The allocator: jemalloc's code (moved into this section at build time) and
// the shim's own malloc-family functions.
#define PROFSHIM_ALLOC __attribute__((section("profshim_alloc"), noinline, used))
// The heap profile's own work inside the allocator: jemalloc's profiling
// code (its prof*.o, moved here at build time) and the shim's unwind of a
// sampled allocation. Part of the allocator for every cut; a CPU sample
// taken in it is the shim's cost, and labeled so.
#define PROFSHIM_HEAP_PROFILING __attribute__((section("profshim_heapprof"), noinline, used))
// The wait profile's wrappers (hooks_wait.cc), never inlined into a caller.
#define PROFSHIM_WAIT __attribute__((section("profshim_wait"), noinline))

namespace wrappers {
uint64_t begin();
uint64_t end();
uint64_t alloc_begin();
uint64_t alloc_end();
uint64_t heap_profiling_begin();
uint64_t heap_profiling_end();
inline bool in_heap_profiling(uint64_t pc) { return pc >= heap_profiling_begin() && pc < heap_profiling_end(); }
inline bool in_alloc(uint64_t pc) { return (pc >= alloc_begin() && pc < alloc_end()) || in_heap_profiling(pc); }
// The wait profile's wrappers of blocking calls (hooks_wait.cc), in a
// section of their own (profshim_wait).
bool in_wait(uint64_t pc);
}  // namespace wrappers
