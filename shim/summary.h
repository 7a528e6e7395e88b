// summary: formats the one line an image leaves on stderr when it finishes,
// naming every file written and the figures a reader of a log wants first.
// README.md shows it and docs/CONFIG.md says what each field means.
#pragma once
#include <stdint.h>
#include <string>
#include <vector>

namespace summary {

struct Figures {
  std::vector<std::string> files;  // full paths written
  uint32_t hz = 0;                 // asked rate; 0: no CPU profile
  uint64_t samples = 0;            // periods in the CPU profile (its samples/count total)
  uint64_t signals = 0;            // timer signals that brought them
  uint64_t credited = 0;           // of samples, credited at a thread's end or the stop
  double profiled_cpu_s = 0;       // the CPU profile's total
  uint64_t dropped = 0;            // periods lost: the table was full, or a thread with
  double dropped_s = 0;            // no sample and no known start routine ended; their CPU
  uint64_t unsampled_threads = 0;  // threads the kernel gave no CPU timer
  uint64_t stacks_cut = 0;         // samples whose stack walk stopped at a frame it could not trust
  uint64_t fatal_deferred = 0;     // fatal signals taken again later: they came in code a stop cannot interrupt
  // The image's CPU (all its threads, the shim's included) from the shim's
  // load to the moment the CPU profiler stopped: what the profile could
  // have covered. What it used after (the rest of the stop, the program's
  // teardown) no profile of this image holds.
  double cpu_to_stop_s = 0;
  double wall_s = 0;               // from the shim's load to the stop
  uint64_t peak_rss_bytes = 0;
  // ru_maxrss as the stop began: what the stop itself added to the peak is
  // the difference (a service near its memory limit asks); 0: not known.
  uint64_t peak_rss_before_stop_bytes = 0;
  uint64_t heap_inuse_bytes = 0;   // the heap profile's inuse_space total
  bool heap_seen = true;           // false: the program's malloc is not ours
  bool go = false;                 // a Go program: its own heap and scheduler are not seen
  // What each engine with no field above says of itself (engine.h), in
  // the engines' order: whole segments (" | waits 1.20 s"), after the heap's.
  std::vector<std::string> more;
  double stop_ms = 0, symbolize_ms = 0;
  // While running (snapshot.h): numbered sets written, the first and last
  // as "DIR/NAME.<seq>.*", how many are still on disk; heap-peak files
  // written (the kept one is among files).
  uint64_t snapshots = 0, snapshots_kept = 0, peaks = 0;
  std::string first_snapshot, last_snapshot;
  uint64_t names_cut = 0;          // addresses left unnamed when the names' time ran out
  std::string unnamed;              // unnamed::hint, if most of the CPU has no names
  std::string who;                 // "pid N (parent M): argv" (identity::brief), last on the line
  // Addresses named from the symbol cache of the session's images, and
  // looked up with libdw.
  uint64_t symbols_cached = 0, symbols_looked_up = 0;
};

std::string format(const Figures& f);

}  // namespace summary
