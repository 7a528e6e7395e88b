// finish: the one routine that writes a set of profiles, whatever asked for
// it -- a stop, a snapshot, a new heap peak: collect each engine's part
// (engine.h), read the mappings, symbolize the unique addresses once for the
// whole set, encode, gzip and write each file atomically. The caller says
// why and under which names; the engines say what they have.
//
// run() is the stop built on it: the snapshot worker finished first
// (snapshot.h), every engine halted, the set written, the heap-peak file
// kept or removed, and the one line printed. Runs on the stop thread, or in
// a fatal signal's handler on a stack of its own (lifecycle.h); a snapshot
// or a peak runs on the snapshot worker. Never on a program thread's stack.
//
// Exactly one line per stop, whoever prints it: the stop itself (the
// summary, with any error in it), the stop ending early (report_failure),
// or someone who gave up waiting (report_timeout) -- the first to take
// Context::reported.
#pragma once
#include <stdint.h>

#include <atomic>
#include <string>
#include <vector>

#include "config.h"
#include "engine.h"

namespace finish {

// The stop's.
struct Context {
  const config::Config* cfg = nullptr;
  std::string stem;                 // file names are <stem>.cpu.pprof / <stem>.heap.pprof
  uint64_t start_mono_ns = 0;       // when profiling started
  uint64_t start_real_ns = 0;       // the same moment, wall clock
  uint64_t stop_mono_ns = 0;        // when the stop was asked for
  uint64_t deadline_mono_ns = 0;    // when waiters give up (stop_mono_ns + PROFILE_STOP_TIMEOUT)
  const char* how = "";             // "return from main", "exit", ...
  std::atomic<bool> reported{false};
  // The final stop gave the engines' tables back (Engine::release): the
  // image cannot go on profiling after a failed exec.
  std::atomic<bool> released{false};
  std::atomic<uint32_t> fatal_deferrals{0};  // fatal signals deferred in this image (fatal_stop.cc)
  char timeout_text[32] = {};       // PROFILE_STOP_TIMEOUT as the user wrote it, in seconds
};

// A set, collected and not yet written.
struct Set {
  engine::Why why = engine::Why::kStop;
  std::vector<procmaps::Line> maps;  // /proc/self/maps when it was collected
  engine::Self self;
  std::vector<engine::Part> parts;  // one per engine that had a part
  std::vector<const engine::Engine*> from;  // the engine of each part
  std::vector<std::string> errors;  // what could not be collected
  const engine::Part* part(const char* kind) const;
};

// Every engine that is on gives its part (a peak: the heap's alone).
void collect(engine::Why why, const engine::When& when, Set* set);

// Names found for earlier sets, reused while their file stays mapped
// there (finish.cc says why). Used by one thread at a time.
struct NameCache;
NameCache* new_name_cache();

// Where a set goes, and what its profiles say of it.
struct Target {
  std::string dir, stem, infix;          // dir/<stem><infix>.<kind>.pprof; infix "" or ".<seq>"
  std::string why;                       // every profile commented "profshim: <why>"
  uint64_t start_real_ns = 0;            // the image's start, in its identity's comments (identity.h)
  uint64_t names_deadline_mono_ns = 0;   // addresses past it get no name (0: no bound)
  NameCache* names = nullptr;             // the snapshot worker's: names kept from its earlier sets
  std::string symbol_cache;              // PROFILE_DIR whose symbol cache the stop reads and adds to; "" none
};
// What writing a set did.
struct Written {
  std::vector<std::string> files;        // the paths written
  double symbolize_ms = 0;
  size_t names_cut = 0;                  // addresses left unnamed at the deadline
  std::string unnamed;                   // unnamed::hint of the CPU part, if most of it has no names
  std::string who;                       // identity::brief, for a summary line
  uint64_t symbols_cached = 0, symbols_looked_up = 0;  // addresses from the symbol cache, and with libdw
};

// Writes each part of the set; every sample carries the image's pid and
// program labels, every profile its identity's comments. Failures go to
// set.errors.
void write(Set& set, const Target& to, Written* out);

// The whole stop, ending with its line.
void run(Context& ctx);
// The stop could not go on (why): its line, unless one was printed.
void report_failure(Context& ctx, const char* why);
// A waiter gave up at the bound. Signal-safe.
void report_timeout(Context& ctx);

}  // namespace finish
