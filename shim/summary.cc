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
  if (f.hz == 0) {
    s += " | cpu profile off";
  } else {
    // Samples are periods of 1/hz of a thread's CPU: the profile's CPU is
    // samples/hz exactly, whatever rate the kernel's tick let through.
    snprintf(b, sizeof b, " | cpu %.2f s in %llu samples at %u Hz", f.profiled_cpu_s,
             (unsigned long long)f.samples, f.hz);
    s += b;
  }
  if (f.unsampled_threads) {
    snprintf(b, sizeof b, ", %llu threads unsampled (no timer)", (unsigned long long)f.unsampled_threads);
    s += b;
  }
  if (f.dropped) {
    snprintf(b, sizeof b, ", %llu dropped (%.2f s of cpu not in the profile)", (unsigned long long)f.dropped,
             f.dropped_s);
    s += b;
  }
  snprintf(b, sizeof b, " | process cpu %.2f s, wall %.2f s | peak rss ", f.cpu_s, f.wall_s);
  s += b + mib(f.peak_rss_bytes) + " | heap in use " + mib(f.heap_inuse_bytes);
  if (!f.heap_seen) s += " (the program's own malloc serves it: heap not profiled)";
  snprintf(b, sizeof b, " | stop %.0f ms (symbols %.0f ms)", f.stop_ms, f.symbolize_ms);
  s += b;
  return s;
}

}  // namespace summary
