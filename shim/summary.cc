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
  // The achieved rate is samples per second of sampled CPU: the kernel
  // delivers at most its tick rate per thread, and each sample is weighted
  // by the CPU time it stands for, so the totals stay true either way.
  double achieved = f.profiled_cpu_s > 0 ? double(f.samples) / f.profiled_cpu_s : 0;
  if (f.hz == 0) {
    s += " | cpu profile off";
  } else {
    snprintf(b, sizeof b,
             " | %llu cpu samples over %.2f s of cpu, %u Hz asked, %.0f achieved (per-thread cpu timers)",
             (unsigned long long)f.samples, f.profiled_cpu_s, f.hz, achieved);
    s += b;
  }
  if (f.unsampled_threads) {
    snprintf(b, sizeof b, ", %llu threads unsampled (no timer)", (unsigned long long)f.unsampled_threads);
    s += b;
  }
  if (f.signal_taken) s += ", stopped early: the program took the sampling signal";
  if (f.dropped) {
    snprintf(b, sizeof b, ", %llu dropped (%.2f s of cpu not in the profile)", (unsigned long long)f.dropped,
             f.dropped_s);
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
