// shim_thread: the threads of the shim's own -- the stop's, the snapshot
// worker's. Started with the real pthread_create (the program's hooks never
// see them: not counted, not given a CPU timer), detached, on a 2 MiB stack
// (libdw reading a line table wants ~150 KiB), with every signal blocked
// but the faults: a blocked fault would kill the process outright, while
// ours end the shim's work through its recovery point (recover.h). A
// thread that blocks every other signal is also one the fatal stop's freeze
// does not wait for (freeze.h).
#pragma once
#include <signal.h>
#include <stddef.h>

namespace shim_thread {

constexpr size_t kStack = size_t(2) << 20;

// False if no thread could be started (thread limits, no memory).
bool spawn(void* (*fn)(void*), void* arg);

// The shim's work's mask: every signal but the faults (a stop run in place
// holds the same ones).
void work_mask(sigset_t* mask);

// The thread's allocator state: its allocations not sampled, and an arena of
// its own (a program thread stopped inside malloc may hold its arena's
// lock). Its first calls into the allocator set up its state there, and
// under memory pressure that is where jemalloc fails (a fault, not NULL):
// call it inside a recovery point.
void enter_allocator();

}  // namespace shim_thread
