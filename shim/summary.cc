// summary: the one-line report; see summary.h.
#include "summary.h"

#include <stdio.h>

namespace summary {
namespace {

std::string mib(uint64_t bytes) {
  char b[32];
  snprintf(b, sizeof b, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  return b;
}

}  // namespace

std::string format(const Figures& f) {
  std::string s = f.files.empty() ? "wrote no profile" : "wrote";
  for (const auto& p : f.files) s += " " + p;
  char b[512];
  snprintf(b, sizeof b, " | %llu cpu samples at %u Hz (%.2f s sampled)", (unsigned long long)f.samples,
           f.hz, f.profiled_cpu_s);
  s += b;
  if (f.dropped) {
    snprintf(b, sizeof b, ", %llu dropped", (unsigned long long)f.dropped);
    s += b;
  }
  snprintf(b, sizeof b, " | wall %.2f s, cpu %.2f s | peak rss ", f.wall_s, f.cpu_s);
  s += b + mib(f.peak_rss_bytes) + " | heap in use " + mib(f.heap_inuse_bytes);
  if (!f.heap_seen) s += " (the program's own malloc serves it: heap not profiled)";
  snprintf(b, sizeof b, " | stop %.0f ms (symbols %.0f ms)", f.stop_ms, f.symbolize_ms);
  s += b;
  return s;
}

}  // namespace summary
