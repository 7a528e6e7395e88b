// sampler: the CPU profiler. One POSIX timer per thread on that thread's own
// CPU clock, delivered to that thread (SIGEV_THREAD_ID) as the shim's signal
// (own_signal.h dispatches it here); the handler unwinds and adds the stack
// to a lock-free table in mmap'd memory. Each signal counts 1 + its overrun
// expirations of the period (samples/count) -- the kernel checks CPU timers
// at its tick, so at rates above the tick one signal carries several -- and
// weighs the CPU its thread used since its previous sample, by the thread's
// own clock (cpu/nanoseconds). What a thread used after its last signal (it
// ended, or the stop came, before the next tick looked) is credited at its
// end, expirations and CPU: totals are true at any rate and for threads
// that live a few milliseconds.
//
// Signal-handler contract (gperftools' profiledata.h style):
//  - Only on_timer() runs in signal context. It touches the slot named by
//    the signal's si_value, the stack table and atomics, and makes one
//    system call of its own (prctl(PR_GET_NAME): the thread's name as the
//    sample is taken, stack_table.h); it allocates nothing and takes no lock. When the table is full it drops the sample
//    and counts it. It runs on whatever stack the signal lands on (the
//    thread's alternate stack, or the interrupted one): a full walk where
//    there is room, else on the interrupted stack if that is the thread's
//    own with room, else the interrupted instruction alone (stackwalk.h).
//  - start() and thread_begin() may run concurrently with handlers.
//  - stop() disables the handler, deletes every timer, waits (bounded) for
//    handlers in flight and credits what every live thread used since its
//    last sample; only after stop() are for_each()'s counts final.
#pragma once
#include <signal.h>
#include <stdint.h>
#include <string>

#include "stack_table.h"

namespace sampler {

// Maps the tables and creates timers for every thread that exists now
// (found in /proc/self/task). False with *err if the kernel refuses.
bool start(uint32_t hz, std::string* err);
bool running();
// In a thread that starts after start(): creates its timer (start_fn: its
// start routine, named for CPU it uses before its first sample); the timer
// is deleted by a thread-exit destructor, which credits the thread's last
// expirations.
void thread_begin(void* start_fn);
// On the main thread, as main is called: main is where its CPU goes if it
// ends with no sample (a main that only starts and joins threads).
void main_begins(void* main_fn);
// Disable, delete all timers, wait for handlers in flight (<= 100 ms),
// credit every live thread's last expirations.
void stop();
// Around fork (pthread_atfork prepare / parent): no handler of ours may be
// mid-walk on another thread while the child's memory is copied.
void quiesce_for_fork();
void resume_after_fork_in_parent();
// In a fork child: fresh tables and a timer for the one thread there is
// (the parent's timers were not inherited; their ids are not ours to delete).
void reset_after_fork();
// After stop(), when an exec failed: sample every thread again.
void resume();

// own_signal's dispatch: whether a timer value is one of our slots, the
// signal itself, and one dequeued by the program's sigwait (its
// expirations are credited to the thread's last stack).
bool owns(const void* value);
void on_timer(siginfo_t* si, void* ucontext);
void on_lost_timer(const siginfo_t* si);

// A published stack (stack_table.h): count is the expirations of the
// period it stands for, weight the CPU nanoseconds they weigh by the
// thread's clock (about count x period), tag 0.
using Stack = stack_table::Stack;
// Calls fn for every published stack, in publication order. Safe while
// sampling goes on: once published, an entry's thread, depth, pcs and order
// never change; only its count and weight grow, until stop().
void for_each(void (*fn)(const Stack&, void*), void* arg);
// The same for the stacks published since *cursor (0 at first), which it
// advances: a dlclose looks only at what is new.
void for_each_since(uint64_t* cursor, void (*fn)(const Stack&, void*), void* arg);
// After the final stop's collect: the table's pages go (stack_table.h,
// release_pages); nothing reads them again.
void release_table();

struct Stats {
  uint64_t signals;      // timer signals taken
  uint64_t expirations;  // periods they and the end-of-thread credits stand for
  uint64_t credited;     // of which credited at a thread's end or the stop
  uint64_t credited_nanos;  // CPU credited there
  uint64_t dropped, dropped_nanos, threads, timer_failures;
  uint64_t cut;  // samples whose stack walk stopped early at a frame it could not trust
};
Stats stats();
uint64_t period_ns();
// The name a thread had when the samples under this serial were taken ("" if
// unknown): each sample reads its thread's name, and a new name is a new
// serial (stack_table.h).
std::string thread_name(uint32_t serial);
// Names the serials of the threads sampled now that no sample has named yet
// (a snapshot while they run).
void record_names();

}  // namespace sampler
