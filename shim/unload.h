// unload: keeps what symbolization needs of a library that the program
// dlclose()s before the stop, so samples taken in its code are still named
// at the stop, when its code is no longer mapped. Not signal-safe: called
// from the dlclose hook, in the program's thread, before the real dlclose.
// That thread only finds what is new (cheap: no file is opened); the
// symbolizing runs on a short-lived thread of the shim's (libdw needs more
// stack than a program's thread may have), not sampled, its allocations not
// in the heap profile, joined before the dlclose goes on. Typical cost of a
// dlclose with new samples in the library: ~1 ms; with none: ~0.1 ms.
//
// What is kept, per library that may be unmapped by the dlclose (the
// handle's object, and every object loaded after it, which includes the
// dependencies that came with it; never an object of the initial set, which
// glibc never unloads):
//  - its executable mappings (path, offset, build ID) as /proc/self/maps
//    shows them now;
//  - the frames of every address lying in it that an engine's stack table
//    holds (engine.h's for_each_since: the CPU's, the waits'; read while
//    sampling goes on: entries are immutable once published), symbolized
//    now, with its file still mapped and on disk.
// Heap-sampled addresses are not symbolized here: their stacks are only
// available through jemalloc's prof.dump, which costs time in proportion to
// every sampled stack of the process and takes the profiler's locks, on each
// dlclose. At the stop they get the gone library's mapping (path and build
// ID: `pprof` can symbolize them given the file) and, when the same address
// was also a CPU-sampled one, its frames.
//
// The first record of an address wins: a later dlclose of a library mapped
// at the same place does not rename what an earlier one recorded. At the
// stop (symbolize::Session) a recorded address is answered from its record
// unless the library that recorded it (same path and build ID) is mapped
// there again. An address alone cannot say when it was sampled: a sample at
// the very same address in other code mapped there later (another library,
// generated code) gets the recorded frames too; any other address there is
// named by what is mapped now. A gone library's mapping that overlaps one
// mapped now (or another gone one) is left out of the profile, which must
// not have overlapping mappings; its recorded frames stay.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pprof.h"
#include "symbolize.h"

namespace unload {

// Before the real dlclose(handle): if the library may be unmapped, records
// its mappings and the names of the sampled addresses that lie in it.
void before_dlclose(void* handle);

// One library as it was at a dlclose. Immutable once published.
struct Record {
  int pid = 0;                             // the image that recorded it
  uint64_t lo = 0, hi = 0;                 // the object's span when it was recorded
  std::string build_id;                    // its build ID, hex ("" if none)
  std::vector<pprof::Mapping> mappings;    // executable segments; has_* all false
  std::vector<uint64_t> addrs;             // sorted, unique
  std::vector<symbolize::Result> results;  // one per addr; mapping indexes mappings
  const Record* next = nullptr;            // the one published before it
};

// Every record published so far, newest first; records of a parent image
// (before a fork) are in the list too: compare pid.
const Record* records();
// Adds r to the list (unload.cc, once r is complete), unless it holds too
// many already: false then, and r stays the caller's.
bool publish(Record* r);

}  // namespace unload
