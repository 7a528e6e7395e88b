// sampler: the CPU profiler. One POSIX timer per thread on that thread's own
// CPU clock, delivered to that thread (SIGEV_THREAD_ID) as kSignal; the
// handler unwinds with libunwind and adds the stack to a lock-free table in
// mmap'd memory, weighted by the CPU time the thread really used since its
// previous sample (so totals stay true when the kernel cannot deliver the
// asked rate). docs/DESIGN.md says why this is ours and not gperftools'.
//
// Signal-handler contract (gperftools' profiledata.h style):
//  - Only handler() runs in signal context. It touches the slot named by the
//    signal's si_value, the stack table and atomics; it allocates nothing and
//    takes no lock. When the table is full it drops the sample and counts it.
//  - start() and thread_begin() may run concurrently with handlers.
//  - stop() disables the handler, deletes every timer and then waits (bounded)
//    for handlers in flight; only after stop() are for_each()'s counts final.
#pragma once
#include <signal.h>
#include <stdint.h>
#include <string>

namespace sampler {

// The shim's own real-time signal: programs and libraries rarely use the top
// of the range, and SIGPROF stays the program's.
int signal_number();

// Installs the handler and creates timers for every thread that exists now
// (found in /proc/self/task). False with *err if the kernel refuses.
bool start(uint32_t hz, std::string* err);
bool running();
// In a thread that starts after start(): creates its timer; the timer is
// deleted by a thread-exit destructor.
void thread_begin();
// Disable, delete all timers, wait for handlers in flight (<= 100 ms).
void stop();
// Around fork (pthread_atfork prepare / parent): no handler may be inside
// libunwind, whose cache lock a child would inherit held.
void quiesce_for_fork();
void resume_after_fork_in_parent();
// In a fork child: fresh tables and a timer for the one thread there is
// (the parent's timers were not inherited; their ids are not ours to delete).
void reset_after_fork();
// After stop(), when an exec failed: sample every thread again.
void resume();

struct Stack {
  const uint64_t* pcs;  // leaf first: pcs[0] is the interrupted instruction,
  uint32_t depth;       // the rest are return addresses
  int32_t tid;
  uint64_t count;
  uint64_t nanos;       // CPU time these samples stand for
};
// Calls fn for every published stack. Safe while sampling goes on (unload.cc
// reads the table at a dlclose): once published, an entry's thread, depth
// and pcs never change; only its count and nanos grow, until stop().
void for_each(void (*fn)(const Stack&, void*), void* arg);

struct Stats {
  uint64_t samples, dropped, dropped_nanos, threads, timer_failures;
};
Stats stats();
// Thread name recorded for tid ("" if unknown).
std::string thread_name(int32_t tid);

}  // namespace sampler
