// summary: formats the one line an image leaves on stderr when it finishes,
// naming every file written and the figures a reader of a log wants first.
#pragma once
#include <stdint.h>
#include <string>
#include <vector>

namespace summary {

struct Figures {
  std::vector<std::string> files;  // full paths written
  uint64_t samples = 0, dropped = 0;
  double dropped_s = 0;            // CPU the dropped samples stood for
  uint64_t unsampled_threads = 0;  // threads the kernel gave no CPU timer
  uint32_t hz = 0;
  bool signal_taken = false;       // the program took the sampling signal
  double wall_s = 0, cpu_s = 0, profiled_cpu_s = 0;
  uint64_t peak_rss_bytes = 0, heap_inuse_bytes = 0;
  bool heap_seen = true;           // false: the program's malloc is not ours
  double stop_ms = 0, symbolize_ms = 0;
};

std::string format(const Figures& f);

}  // namespace summary
