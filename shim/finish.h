// finish: the stop, in one straight line: stop the CPU sampler, stop heap
// sampling, take the heap dump, read the mappings, symbolize the unique
// addresses once for both profiles, encode, gzip, write atomically, and print
// the one summary line. Runs on the shim's stop thread only (lifecycle.h).
#pragma once
#include <stdint.h>
#include <string>

#include "config.h"

namespace finish {

struct Context {
  const config::Config* cfg;
  std::string stem;           // file names are <stem>.cpu.pprof / <stem>.heap.pprof
  uint64_t start_mono_ns;     // when profiling started
  uint64_t start_real_ns;     // the same moment, wall clock, for time_nanos
  uint64_t stop_mono_ns;      // when the stop was asked for
  const char* how;            // "return from main", "exit", ...
};

void run(const Context& ctx);

}  // namespace finish
