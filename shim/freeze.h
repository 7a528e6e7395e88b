// freeze: after a fatal signal, no thread of the program runs another
// instruction of the program while the stop writes (without the shim the
// process would already be gone). The thread that handles the signal asks
// every other thread, with the shim's own signal, to park where it is; a
// thread interrupted inside code whose locks the stop needs (the
// allocator, the dynamic loader, the shim) declines and is asked again a
// moment later, when it has left. Threads that never answer (glibc's own
// helper threads block every signal) are left as they are when the bound
// passes.
//
// Signal-safe: raw system calls (getdents64 on /proc/self/task,
// rt_tgsigqueueinfo, futex), no allocation.
#pragma once
#include <stdint.h>

namespace freeze {

struct Result {
  int threads = 0;     // other threads seen
  int frozen = 0;      // parked
  int unanswered = 0;  // still running when the bound passed
};

// Parks every other thread until park_until_ns (CLOCK_MONOTONIC; the
// process is dead long before), waiting for them at most until deadline_ns.
Result others(uint64_t deadline_ns, uint64_t park_until_ns);

// The request's handler side, in the thread asked.
void on_request(void* ucontext);
// A request a thread took in sigwait and friends (not in a handler): it is
// at a safe point, and parks.
void park_here();

}  // namespace freeze
