// finish: the stop, in one straight line: stop the CPU sampler, stop heap
// sampling, take the heap dump, read the mappings, symbolize the unique
// addresses once for both profiles, encode, gzip, write atomically, and print
// the one line. Runs on the stop thread, or in a fatal signal's handler on a
// stack of its own (lifecycle.h); never on a program thread's stack.
//
// Exactly one line per stop, whoever prints it: the stop itself (the
// summary, with any error in it), the stop ending early (report_failure),
// or someone who gave up waiting (report_timeout) -- the first to take
// Context::reported.
#pragma once
#include <stdint.h>

#include <atomic>
#include <string>

#include "config.h"

namespace finish {

struct Context {
  const config::Config* cfg = nullptr;
  std::string stem;                 // file names are <stem>.cpu.pprof / <stem>.heap.pprof
  uint64_t start_mono_ns = 0;       // when profiling started
  uint64_t start_real_ns = 0;       // the same moment, wall clock, for time_nanos
  uint64_t stop_mono_ns = 0;        // when the stop was asked for
  uint64_t deadline_mono_ns = 0;    // when waiters give up (stop_mono_ns + PROFILE_STOP_TIMEOUT)
  const char* how = "";             // "return from main", "exit", ...
  std::atomic<bool> reported{false};
  char timeout_text[32] = {};       // PROFILE_STOP_TIMEOUT as the user wrote it, in seconds
};

// The whole stop, ending with its line.
void run(Context& ctx);
// The stop could not go on (why): its line, unless one was printed.
void report_failure(Context& ctx, const char* why);
// A waiter gave up at the bound. Signal-safe.
void report_timeout(Context& ctx);

}  // namespace finish
