// engine: the whole contract of a profile kind. Everything else asks the
// engines through all() and names none of them: setup starts them, the state
// machine (lifecycle.h) carries them across fork and a failed exec and halts
// them at a stop or under a seccomp filter, the snapshot worker and unload's
// helper keep their own threads out of them, unload reads the stacks they
// published, image.h claims and renames their files, and the writer
// (finish.h) collects their parts of a set and their summary fields. The
// writer decides why a set of profiles is written (a stop, a snapshot, a new
// heap peak) and how (symbolize once, encode, write); an engine only says
// what it has: a part of the set, its samples as raw addresses with values
// and labels, and its profile's header. jemalloc's prof_dump_impl(tsd,
// writer, ...) is the model: the caller decides why, the routine only how.
//
// A new profiler is one engine file (engine_KIND.cc, with the module that
// samples), one line in all() (engine.cc) and its docs; an engine that keeps
// a stack table shares the snapshot arithmetic (engine_table.h). Not
// signal-safe: everything here runs on a thread of the shim's (the stop's,
// the snapshot worker's), a fatal signal's fresh stack, or a program's
// thread inside a fork, an exec or a dlclose the shim wraps.
#pragma once
#include <stdint.h>

#include <string>
#include <vector>

#include "config.h"
#include "pprof.h"
#include "procmaps.h"
#include "stack_table.h"
#include "summary.h"

namespace engine {

struct TableSource;  // engine_table.h

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
  // Whose it is: 0 for this image's own, else a fork child's pid (its
  // samples handed over, forks.h): the writer's pid label says it.
  int32_t pid = 0;
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

// A heap stack as jemalloc dumped it (return addresses, the allocator
// first) cut as this image's heap part cuts its own (engine_heap.cc): false
// if it is the shim's own allocation or has no frame left.
bool heap_sample_of(const uint64_t* pcs, size_t n, const Self& self, Sample* out);

// Every member is set by each engine but the hooks marked optional (null:
// nothing to do). Designated initialisers name them (engine_cpu.cc).
struct Engine {
  // The kind of its stop's and its snapshots' files:
  // <stem>[.<seq>].<name>.pprof.
  const char* name = nullptr;
  // The kinds of the other files it writes while running (the heap's peak),
  // null-terminated; optional.
  const char* const* also = nullptr;
  // At setup, once the shim's signal is installed: starts if cfg asks for
  // it, else makes sure it is off. False with *err (a setup error).
  bool (*start)(const config::Config& cfg, std::string* err) = nullptr;
  // Whether this image profiles with it. halt, collect and the optional
  // hooks up to sandboxed are called only when it does.
  bool (*on)() = nullptr;
  // An image begins (setup, a fork child), on or not: what the next set
  // covers starts now.
  void (*begin)(const When& now) = nullptr;
  // A stop: the source stops before anything is collected (the CPU timers,
  // so the stop's own work is not in the profile; heap sampling, before the
  // stop allocates). Never called for a snapshot or a peak.
  void (*halt)() = nullptr;
  // Optional. Around fork, on the forking thread (pthread_atfork's prepare
  // and parent): no handler of its may be mid-walk while the child's
  // memory is copied.
  void (*before_fork)() = nullptr;
  void (*after_fork_in_parent)() = nullptr;
  // Optional. In a fork child, before begin(): fresh tables (the parent's
  // samples are the parent's); what the parent's seccomp filter forbade
  // stays off (sandbox.h).
  void (*after_fork_in_child)() = nullptr;
  // Optional. An exec failed after its stop: the same image goes on, with
  // the same tables, sampling again where the seccomp filter allows.
  void (*resume)() = nullptr;
  // Optional. A seccomp filter now forbids the calls its sampling makes:
  // sampling stops, what it has stays for the stop.
  void (*sandboxed)() = nullptr;
  // Optional, called whether on or not. On a thread of the shim's (the
  // snapshot worker, unload's helper): nothing it does is the program's.
  void (*quiet_thread)() = nullptr;
  // Optional, called whether on or not: the stacks it published since
  // *cursor (0 at first), which it advances (unload.h looks for addresses
  // in code a dlclose may unmap). Null: it keeps no stack table.
  void (*for_each_since)(uint64_t* cursor, void (*fn)(const stack_table::Stack&, void*), void* arg) = nullptr;
  // Optional: its stack table, when it keeps one (engine_table.h), which a
  // fork child hands over whole and its parent adds to its parts (forks.h).
  const TableSource* table = nullptr;
  // Its part of a set. False with *err when it failed; false with *err
  // empty when it has no part in this kind of set (the CPU, in a peak).
  bool (*collect)(Why why, const When& when, const Self& self, Part* out, std::string* err) = nullptr;
  // What the stop's summary line says of it, from its part of the stop's set
  // (part is null when it had none). An engine without fields of its own in
  // summary::Figures says its own segment (Figures::more).
  void (*figures)(const Part* part, summary::Figures* f) = nullptr;
  // Optional. The final stop's set is collected: the memory its tables
  // hold goes back to the system before the stop's own work adds to the
  // process's peak RSS. Not after an exec's stop (resume reads them again).
  void (*release)() = nullptr;
};

// The engines, in the order their files are written. What turns sampling
// on (start, resume) goes through them backwards: the CPU profiler, first
// here, starts last, so no other engine's start-up (jemalloc's warm-up of a
// new sample rate) is in its profile.
const Engine* const* all(int* n);

// The engines' hooks, for each engine that is on (the optional ones where
// it has them): lifecycle.h's fork, failed exec and seccomp filter;
// backwards for what turns sampling on (all()).
using Hook = void (*)();
void each_on(Hook Engine::*hook, bool backwards = false);
// On a thread of the shim's: every engine's quiet_thread.
void quiet_thread();

}  // namespace engine
