// engine: what the writer (finish.h) asks of each profiler. The writer
// decides why a set of profiles is written (a stop, a snapshot, a new heap
// peak) and how (symbolize once, encode, write); an engine only says what it
// has: a part of the set, its samples as raw addresses with values and
// labels, and its profile's header. jemalloc's prof_dump_impl(tsd, writer,
// ...) is the model: the caller decides why, the routine only how.
//
// A new profiler adds one Engine and one line in all() (engine.cc); the
// writer, the snapshot worker and the summary need no change. Not
// signal-safe: everything here runs on a thread of the shim's (the stop's,
// the snapshot worker's) or a fatal signal's fresh stack.
#pragma once
#include <stdint.h>

#include <string>
#include <vector>

#include "procmaps.h"

#include "pprof.h"
#include "summary.h"

namespace engine {

enum class Why { kStop, kSnapshot, kPeak };

// The moment a set stands for: the stop's request, a snapshot's start.
struct When {
  uint64_t mono_ns = 0, real_ns = 0;
};

struct Sample {
  std::vector<uint64_t> addrs;  // leaf first, each inside its instruction (looked up as it is)
  std::vector<int64_t> values;  // one per sample type
  std::vector<pprof::Label> labels;
  // A frame below addrs, by name alone, in no mapping (the wait profile's
  // blocking call); empty for none.
  std::string leaf;
};

// One profile of a set, before symbolization.
struct Part {
  std::string kind;  // its file: <stem>[.<seq>].<kind>.pprof
  std::vector<pprof::ValueType> types;
  std::string default_type;
  // pprof's drop_frames: a frame whose function's whole name matches is
  // hidden by pprof, with every frame it called (empty: none).
  std::string drop_frames;
  pprof::ValueType period_type;
  int64_t period = 0;
  int64_t time_ns = 0, duration_ns = 0;  // wall clock; no duration for a moment (a heap)
  std::vector<Sample> samples;
  std::vector<std::string> comments;  // the engine's own, after the writer's
  // The sum of one sample type over the part (0 if it has no such type).
  int64_t total(const char* type) const;
};

// The shim's own code, which no profile shows: its text (but the
// allocator's, which serves the program), the wrappers around main and
// thread starts, and the allocator, where every heap stack is cut.
struct Self {
  struct Range { uint64_t lo, hi; };
  std::vector<Range> text;
  Range wrap{0, 0}, alloc{0, 0}, heap_profiling{0, 0};
  bool in_text(uint64_t pc) const;
  bool in_wrap(uint64_t pc) const { return pc >= wrap.lo && pc < wrap.hi; }
  bool in_heap_profiling(uint64_t pc) const { return pc >= heap_profiling.lo && pc < heap_profiling.hi; }
  bool in_alloc(uint64_t pc) const { return (pc >= alloc.lo && pc < alloc.hi) || in_heap_profiling(pc); }
  // Work done here on a program's thread is the program's call's cost,
  // shown at the caller.
  bool shim_own(uint64_t pc) const { return in_wrap(pc) || (in_text(pc) && !in_alloc(pc)); }
};
// From /proc/self/maps, parsed: every mapping of the file that holds the shim.
Self self_ranges(const std::vector<procmaps::Line>& lines);

struct Engine {
  const char* name;
  // Whether this image profiles with it.
  bool (*on)();
  // An image begins (setup, a fork child): what the next set covers starts now.
  void (*begin)(const When& now);
  // A stop: the source stops before anything is collected (the CPU timers,
  // so the stop's own work is not in the profile; heap sampling, before the
  // stop allocates). Never called for a snapshot or a peak.
  void (*halt)();
  // Its part of a set. False with *err when it failed; false with *err
  // empty when it has no part in this kind of set (the CPU, in a peak).
  bool (*collect)(Why why, const When& when, const Self& self, Part* out, std::string* err);
  // What the stop's summary line says of it, from its part of the stop's set
  // (part is null when it had none).
  void (*figures)(const Part* part, summary::Figures* f);
};

// The engines, in the order their files are written.
const Engine* const* all(int* n);

extern const Engine kCpu;
extern const Engine kHeap;
extern const Engine kWait;

}  // namespace engine
