// engine_table: the part of a set for an engine that keeps a stack table
// (stack_table.h): the CPU's, the waits'. The table only grows, so a
// snapshot's part is what each entry gained since the previous snapshot:
// each entry's values then are kept by its place in publication order.
// Consecutive snapshots and the stop's part add up to the run; a stop does
// not move those marks (after a failed exec the image's next stop covers
// the same ground again, as it always has). Each sample is labelled with
// its thread (thread_id, and thread_name when the table has one). Not
// signal-safe (engine.h).
#pragma once
#include <stdint.h>

#include <string>
#include <vector>

#include "engine.h"
#include "stack_table.h"

namespace engine {

// What differs between such engines.
struct TableSource {
  // Every published stack, with its values as the profile shows them.
  void (*for_each)(void (*fn)(const stack_table::Stack&, void*), void* arg);
  std::string (*thread_name)(uint32_t serial);
  // What a sample has before its thread's labels (the wait's call: its leaf
  // and label; the CPU's: whose allocator work it is); null: nothing.
  void (*dress)(const stack_table::Stack& st, const Self& self, Sample* s);
  // Whether an entry that gained weight but no count is in the part (CPU
  // credited at a thread's end is; a wait that rounds to no contention is
  // not).
  bool weight_alone;
};

// A stack of another process's table (a fork child's, handed over whole:
// forks.h) as a sample of this image's part, as collect() makes one: the
// program's frames, all its values {count, weight}, dressed, labelled with
// its thread (thread_name as the child had it). False when it is not in a
// part (no frame of the program's; no count where weight alone is not).
bool table_sample_of(const TableSource& src, const stack_table::Stack& st, const std::string& thread_name,
                     const Self& self, Sample* out);

// One per engine, a global: zero until begin(), with no dynamic
// initialiser (DESIGN "Globals").
class TableDelta {
 public:
  // An image begins: its part starts now, from a new table (a fork child's
  // table is new; the parent's marks are left as they were).
  void begin(const When& now);
  // The part's window (time_ns, duration_ns) and samples, values
  // {count, weight}; the engine fills in the rest of the header. A snapshot
  // moves the window and the marks to now.
  void collect(const TableSource& src, bool snapshot, const When& when, const Self& self, Part* out);
  // The whole run's weight, at the last stop (the summary's).
  uint64_t run_weight() const { return run_weight_; }

  struct Mark {
    uint64_t count, weight;
  };

 private:
  uint64_t window_mono_, window_real_;  // where the next part begins
  std::vector<Mark>* marks_;  // each entry's values at the last snapshot; from the first one
  uint64_t run_weight_;
};

}  // namespace engine
