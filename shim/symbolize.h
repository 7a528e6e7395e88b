// symbolize: turns the unique sampled addresses of this process into
// function / file / line / inlined frames, and describes the executable
// mappings (path, offset, build ID, has_* flags) for profile.proto.
// Uses elfutils' libdw, loaded with dlopen(RTLD_LOCAL) only when profiling is
// active, so an inert process never maps it and its symbols never bind for
// the host. Not signal-safe: runs only at the stop, on the stop thread.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pprof.h"
#include "procmaps.h"

namespace symbolize {

// dlopen()s libdw and resolves the functions used (setup.cc says when);
// false with *err set if libdw is not usable; true at once if loaded.
bool load_libdw(std::string* err);
// Around a fork: a child forked while another thread (the snapshot
// worker) loads libdw would wait for a loader that is not in it, 2 s at
// its stop, and name nothing. The fork waits for that load to end first
// (a fraction of a millisecond; at most 1 s), and none starts until the
// fork is done; a child forked while one still runs does without libdw
// (names from the symbol cache).
void libdw_before_fork();
void libdw_after_fork_in_parent();
void libdw_after_fork_in_child();

struct Result {
  int mapping = -1;                  // index into Session::mappings(), -1 if none
  std::vector<pprof::Frame> frames;  // innermost first; empty if unknown
  bool inlines_known = false;        // found in DWARF: inlined calls, if any, are in frames
  bool go_tables = false;            // named by a stripped Go binary's own tables
};

// What the locations of one mapping have. pprof reads a mapping's has_*
// flags as "every location here has it" and then never symbolizes the
// mapping itself, so a flag is set only when all of them do. Except in a
// stripped Go binary: pprof's own lookup there names the wrong function
// (runtime.goexit's entry as runtime.gcWriteBarrier, Go 1.19) and has no
// name for its C code either, so a mapping Go's tables named is marked
// named, and pprof leaves it as written.
struct Coverage {
  uint64_t locations = 0, functions = 0, filenames = 0, line_numbers = 0, inline_frames = 0, go_tables = 0;
  void add(const Result& r);
  void apply(pprof::Mapping* m) const;  // sets the four has_* flags
};

// How the addresses of a Session were answered.
struct CacheStats {
  uint64_t cached = 0;      // from the symbol cache
  uint64_t looked_up = 0;   // with libdw (the rest had no mapping, or were unloaded code)
  uint64_t from_table = 0;  // of those, named from a module's kept symbol table, libdw not needed
  uint64_t rejected = 0;    // cache entries not used: corrupt, or their files changed
  uint64_t stored = 0;      // cache entries written
};

class Session {
 public:
  // maps_text: /proc/self/maps as read at the stop (before anything unloads).
  // with_unloaded: also answer for code the program dlclose()d before
  // (unload.h): an address recorded at a dlclose, and no longer mapped by the
  // library that recorded it, gets the frames found then and that library's
  // mapping (appended to mappings() unless it overlaps one already there);
  // an address that is mapped by nothing now but lies in a gone library's
  // mapping gets that mapping and no frames.
  // profile_dir: where the symbol cache of the session's images is
  // (symbolize_cache.h), "" for none.
  explicit Session(const std::string& maps_text, bool with_unloaded = true,
                   const std::string& profile_dir = "");
  // The same from maps already parsed (procmaps::parse).
  Session(std::vector<procmaps::Line> lines, bool with_unloaded, const std::string& profile_dir);
  ~Session();
  // addrs are already adjusted to lie inside the instruction (return
  // addresses minus one). out gets one Result per address, same order.
  // From deadline_mono_ns on (CLOCK_MONOTONIC; 0: none), addresses not yet
  // resolved get their mapping and no frames; returns how many did.
  size_t lookup(const std::vector<uint64_t>& addrs, std::vector<Result>* out, uint64_t deadline_mono_ns = 0);
  // Writes what lookup() found with libdw to the symbol cache (the stop
  // does it once the profiles are written).
  void keep();
  // Called after each module's files and DWARF are released (the stop's
  // gives its allocator's free pages back: heap.h, trim_private_arena).
  void after_each_module(void (*fn)());
  // Executable mappings, the main executable first, each with has_* flags
  // true only where every address looked up in it found names / files /
  // lines / inlines.
  const std::vector<pprof::Mapping>& mappings() const;
  // Per mapping: whether it is a library that is there only for the shim —
  // the shim itself (unless it is the executable), libdw, and
  // what they and it need that nothing of the program needs (libelf, libz,
  // liblzma, ...). A profile leaves these out unless a location lies in one.
  std::vector<bool> loaded_for_shim() const;
  const CacheStats& cache_stats() const;
  // What went wrong that the line should say (libdw not loadable, the cache
  // not usable); "" if nothing.
  std::string error() const;
  struct Impl;
 private:
  Impl* impl_;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

}  // namespace symbolize
