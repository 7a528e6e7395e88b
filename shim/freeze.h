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

#include <atomic>

namespace freeze {

// Set once the process is certain to die of a fatal signal (a fault, or a
// signal acted on), before the threads are asked: a program thread that
// enters one of the shim's wrappers of a blocking call (write, a lock, a
// sleep) parks there at once, so that a thread the freezer has not reached
// yet -- the handling thread preempted on a loaded machine -- does no more
// of the program's work than it would have without the shim.
extern std::atomic<bool> g_requested;
inline bool requested() { return g_requested.load(std::memory_order_relaxed); }

// The process is going to die of a fatal signal: threads park until
// park_until_ns (CLOCK_MONOTONIC) at the wrappers from now on.
void announce(uint64_t park_until_ns);
// The process is about to die of a fatal signal, most likely: one deferred
// for a moment, which the program may still take over (its handler
// installed before the retry). Threads park at the wrappers, but only until
// park_until_ns, a few milliseconds off: should the process live on after
// all, a parked thread has waited no longer than a preempted one would.
void hold(uint64_t park_until_ns);
// The process lives on: a hold is over (an announce is never withdrawn).
void release();
// At a wrapper's entry once requested(): parks this thread unless it is
// the shim's own or the one stopping, or a frame of its stack is inside
// code whose locks the stop may need.
void at_call();
// On the way out of a call to the program's own allocator once requested():
// parks this thread like at_call, unless a frame outside the allocator's
// holds locks the stop needs. errno is kept.
void after_alloc();
// While this thread does the stop's work (a stop thread, the snapshot
// worker, a thread stopping in place or for a fatal signal) it is never
// parked at a call. Returns what it was.
bool exempt(bool on);
// In a fork child: nothing requested (the parent's death is the parent's).
void after_fork();

struct Result {
  int threads = 0;     // other threads seen
  int frozen = 0;      // parked
  int unanswered = 0;  // still running when the bound passed
};

// Parks every other thread until park_until_ns (CLOCK_MONOTONIC; the
// process is dead long before), waiting for them at most until deadline_ns.
Result others(uint64_t deadline_ns, uint64_t park_until_ns);

// others() for a stop that must be done by stop_deadline_ns: waits at most a
// quarter of the time left (300 ms at most), parks until 5 s past it.
Result others_before(uint64_t stop_deadline_ns);

// Whether a thread other than the caller does not block sig now (one the
// kernel could give a process-directed sig to).
bool another_takes(int sig);

// The request's handler side, in the thread asked.
void on_request(void* ucontext);
// A request a thread took in sigwait and friends (not in a handler): it is
// at a safe point, and parks.
void park_here();

}  // namespace freeze
