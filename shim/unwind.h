// unwind: libunwind, loaded with dlopen(RTLD_LOCAL) when profiling starts,
// and the walks of a thread's stack that the shim needs: the sampler's (from
// the context a signal interrupted) and the stop's safety checks (is this
// thread inside code whose locks the stop would need?).
//
// Signal-safe once load() has returned: libunwind runs with no cache, so a
// step takes no lock of libunwind's (its caches' mutex would deadlock a
// handler that interrupted a thread holding it; its per-thread cache is a
// __thread block glibc mallocs on first use), and nothing here allocates.
#pragma once
#include <stdint.h>
#include <string>

namespace unwind {

// Marks a frame whose address is an interrupted instruction (the leaf of a
// signal's context, or the frame a signal trampoline interrupted), not a
// return address: it is looked up as it is, not minus one.
constexpr uint64_t kExact = 1ull << 63;
inline uint64_t pc_of(uint64_t frame) { return frame & ~kExact; }
// The address to symbolize for a recorded frame: inside the instruction.
inline uint64_t lookup_addr(uint64_t frame) { return (frame & kExact) ? pc_of(frame) : frame - 1; }

// dlopen()s libunwind; false with *err if it is not usable.
bool load(std::string* err);
bool loaded();

// The stack of the context a signal handler received (its ucontext): frames
// leaf first, the leaf and every frame a signal trampoline interrupted
// marked kExact, the trampolines themselves left out. At least one frame
// (the interrupted instruction) even when libunwind cannot step.
int from_signal(void* ucontext, uint64_t* frames, int max);

// Address ranges of code that holds locks the stop needs: the shim itself
// (jemalloc is inside it) and the dynamic loader. Filled by note_unsafe_code().
void note_unsafe_code();
bool in_unsafe_code(uint64_t pc);
// Whether the context a signal interrupted is inside such code, in any of
// its first frames (a thread inside malloc, or inside a lock jemalloc took).
bool interrupted_in_unsafe_code(void* ucontext);
// Whether the calling thread runs inside a signal handler that interrupted
// such code (a program's handler that calls exit(), say).
bool inside_handler_over_unsafe_code();

}  // namespace unwind
