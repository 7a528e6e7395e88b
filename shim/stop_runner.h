// stop_runner: where a stop that lifecycle has claimed runs, and what bounds
// it. A stop in the normal course of the program runs on a thread of its
// own (shim_thread.h): off the program's stack (a 64 KiB thread stack is
// legal; libdw wants ~150 KiB) and off an arena whose lock a stopped thread
// might hold, and the caller can go on when the bound passes. Where no
// thread can be started (thread limits, no memory), or inside a signal
// handler (pthread_create could meet its own locks held: the handler
// interrupted a thread's start or end), it runs in place on a fresh stack
// (stack.h) with a timer on the shim's signal as its watchdog; so does a
// stop on the process's only thread, with every other signal held (no lock
// of another thread to avoid, and a thread's start and hand-overs were much
// of a short image's cost). A fatal
// signal's stop runs in its handler, on a fresh stack, after the program's
// other threads are parked (freeze.h), with the same watchdog.
//
// Every stop runs inside a recovery point (recover.h): a crash or a failed
// allocation ends the stop with one line, not the process.
#pragma once
#include <signal.h>

#include "finish.h"

namespace stop_runner {

// Where a normal stop would run, decided before it is claimed and held
// until it is done: on this thread (in a signal handler, or the process's
// only thread) every signal but the watchdog's and a fault's is held from
// before the claim, since a signal taken after the claim waits for the stop
// to be done -- itself, for the whole stop timeout (a pool's worker told to
// go as it returns from main). The destructor puts the mask back.
class Place {
 public:
  explicit Place(bool in_handler);
  ~Place();
  // Holds them from here on (a stop that could get no thread of its own).
  void hold();
  Place(const Place&) = delete;
  Place& operator=(const Place&) = delete;
  bool in_handler;
  bool here;  // the process's only thread, not in a handler

 private:
  bool held_;
  sigset_t old_;
};

// A normal stop. done() is called once the stop has finished or given up
// (on the stop thread, or here before returning).
void normal(finish::Context& ctx, Place& place, void (*done)());
// A fatal signal's stop, here (signal context, on a fresh stack already).
void fatal(finish::Context& ctx);

// The watchdog fired on this thread (signal context): an in-place normal
// stop is abandoned through its recovery point (does not return then), or
// asked again a moment later while it is inside code whose locks the program
// needs (true then). False: no normal stop is under way here.
bool on_watchdog(void* ucontext);
// Whether the calling thread is a stop thread.
bool on_stop_thread();
// This thread runs a normal stop: a stop thread, or one in place (from
// before its claim, while a Place holds the signals).
bool stopping_here();

}  // namespace stop_runner
