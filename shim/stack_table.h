// stack_table: an engine's samples, one entry per (thread, tag, stack) with
// two counters, in mmap'd memory; and the names of the threads, by serial.
// The CPU sampler keeps one (tag 0; its counters expirations and CPU
// nanoseconds), the wait profile another (tag: the blocking call; its
// counters contentions and delay). add() runs in signal handlers and in the
// program's own calls: it takes no lock and allocates nothing (open
// addressing, entries published with a state word; the stacks' PCs in an
// arena). Entries are also logged in the order they were published, so that
// a dlclose looks only at what is new and a snapshot finds each entry's
// values at the previous one by its place.
//
// A Table has no constructor: a global one is zero until map(), with no
// dynamic initialiser (DESIGN "Globals").
#pragma once
#include <stdint.h>

#include <atomic>
#include <string>

namespace stack_table {

struct Stack {
  const uint64_t* pcs;  // leaf first, as stackwalk.h records them (kExact marks
  uint32_t depth;       // interrupted instructions; the rest are returns)
  int32_t tid;
  uint32_t serial;      // the thread's own number in this table, never reused (tids are)
  uint64_t count;       // the engine's first counter (expirations; contentions)
  uint64_t weight;      // its second, what each count weighs (CPU nanoseconds; delay)
  uint32_t tag;         // what else keys the entry (the wait profile's call; 0 for CPU)
  uint32_t order;       // its place in publication order (0, 1, ...): stable for the table's life
};

class Table {
 public:
  // Fresh, zeroed tables (at start and in a fork child); false with *err
  // ("cannot map the <what> table: ...").
  bool map(const char* what, std::string* err);
  void unmap();
  // In a fork child: empty tables, as map() makes them (the same memory,
  // which the fork zeroed, where it could).
  bool renew(const char* what, std::string* err);
  bool mapped() const { return entries_ != nullptr; }
  // The final stop's, once its set holds copies of the stacks: the
  // entries', hash slots', PCs' and log's pages go back to the system (a
  // busy program's ~0.3 MiB would count in the stop's peak RSS). The memory
  // stays mapped, so a reader that comes anyway (a dlclose's) finds an
  // empty log, and a late add() a zero page; the names stay.
  void release_pages();

  // Adds count and weight to (serial, tag, stack): a reference to the entry
  // for add_to(), or 0 if the table had no room (then dropped). *created
  // (if given) says whether the entry is new. Signal-safe.
  uint32_t add(const uint64_t* pcs, uint32_t n, int32_t tid, uint32_t serial, uint32_t tag, uint64_t count,
               uint64_t weight, bool* created = nullptr);
  void add_to(uint32_t ref, uint64_t count, uint64_t weight);
  // Counts what is lost.
  void drop(uint64_t count, uint64_t weight);
  uint64_t dropped() const { return dropped_.load(); }
  uint64_t dropped_weight() const { return dropped_weight_.load(); }

  // A thread's name (up to 15 bytes) by its serial; "" if none. A serial's
  // name, once recorded, never changes: a thread that takes another name
  // goes on under a new serial (serial_now), so that each sample keeps the
  // name its thread had when it was taken. record_name is signal-safe.
  void record_name(uint32_t serial, int32_t tid, const char* name);
  std::string name(uint32_t serial) const;
  // The serial the calling thread's next entry goes under, given the one
  // its last went under (*serial, 0 for none yet): the same while the
  // thread's name -- the kernel's, read now, one prctl -- is the one
  // recorded for it (or none is yet: then it is recorded), else a new one
  // from *serials, named, and stored in *serial. Reading the kernel's name
  // at each sample sees every way of renaming a thread: its own prctl or
  // pthread_setname_np, another thread's, a write to
  // /proc/self/task/TID/comm. A table takes at most a thousand renames
  // (each a new serial, so new entries for the same stacks): past them a
  // thread renamed goes on under the serial it has, whose name is the one
  // it had at its last split, and a thread renaming itself in a loop
  // cannot fill the table the other threads need. Signal-safe.
  uint32_t serial_now(uint32_t* serial, std::atomic<uint32_t>* serials, int32_t tid);

  // Every published entry, in publication order. Safe while adds go on:
  // once published, an entry's thread, tag, depth, pcs and order never
  // change; only its counters grow.
  void for_each(void (*fn)(const Stack&, void*), void* arg) const;
  // The same for the entries published since *cursor (0 at first), which
  // it advances.
  void for_each_since(uint64_t* cursor, void (*fn)(const Stack&, void*), void* arg) const;

  struct Entry;
  struct Name;

 private:
  bool fill(Entry& e, uint64_t h, int32_t tid, uint32_t serial, uint32_t tag, const uint64_t* pcs, uint32_t n,
            uint64_t count, uint64_t weight);
  void publish(uint32_t idx);
  Stack stack_of(const Entry& e, uint64_t order) const;
  // The mappings and their sizes, the names last (release_pages keeps them).
  struct Region {
    void* at;
    size_t bytes;
  };
  static constexpr int kRegions = 5;
  void regions(Region out[kRegions]) const;

  Entry* entries_;   // in the order taken
  uint32_t* slots_;  // by hash: 0, kClaimed, or an entry's index + 1
  uint64_t* arena_;
  Name* names_;   // by serial
  uint32_t* log_;  // entry index + 1, in the order entries were published
  std::atomic<uint64_t> arena_used_, log_used_, entries_used_;
  std::atomic<uint64_t> dropped_, dropped_weight_;
  std::atomic<uint32_t> renames_;  // serials taken for a new name (serial_now)
  bool wiped_;  // every mapping is zeroed in a fork child (MADV_WIPEONFORK)
};

}  // namespace stack_table
