// summary: the one-line report; see summary.h.
#include "summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

namespace summary {
namespace {

std::string mib(uint64_t bytes) {
  char b[32];
  snprintf(b, sizeof b, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  return b;
}

// Seconds to two decimals, from whole hundredths, so that figures printed
// this way and differences of them add up on the line.
long long hundredths(double s) { return (long long)(s * 100 + (s < 0 ? -0.5 : 0.5)); }  // no libm (DESIGN.md)
std::string secs(long long h) {
  char b[32];
  snprintf(b, sizeof b, "%s%lld.%02lld", h < 0 ? "-" : "", llabs(h) / 100, llabs(h) % 100);
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
    // The profile's CPU (its cpu/nanoseconds total, by the threads' clocks)
    // and its samples/count total: periods of 1/hz of a thread's CPU, about
    // cpu x hz whatever rate the kernel's tick let through.
    snprintf(b, sizeof b, " s in %llu samples at %u Hz", (unsigned long long)f.samples, f.hz);
    s += " | cpu " + secs(hundredths(f.profiled_cpu_s)) + b;
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
  if (f.stacks_cut) {
    snprintf(b, sizeof b, ", %llu stacks cut short (frames the unwinder could not trust)",
             (unsigned long long)f.stacks_cut);
    s += b;
  }
  // The CPU the profile does not cover, where a log reader compares the
  // profile with `time` or a service's accounting: the gap up to the stop
  // (setup before sampling, the shim's own threads, dropped samples), and
  // everything after it -- the program's atexit handlers and static
  // destructors run once this line is out, so it can only say they are not
  // in the profile, never how much they used.
  s += " | process cpu " + secs(hundredths(f.cpu_to_stop_s)) + " s to the stop";
  if (f.hz) {
    long long gap = hundredths(f.cpu_to_stop_s) - hundredths(f.profiled_cpu_s);
    s += ", " + secs(gap > 0 ? gap : 0) + " s of it not in the profile (nor is any cpu after the stop)";
  }
  snprintf(b, sizeof b, " | wall %.2f s | peak rss ", f.wall_s);
  s += b + mib(f.peak_rss_bytes);
  if (f.peak_rss_before_stop_bytes) s += " (" + mib(f.peak_rss_before_stop_bytes) + " before the stop)";
  s += " | heap in use " + mib(f.heap_inuse_bytes);
  if (!f.heap_seen) s += " (the program's own malloc serves it: heap not profiled)";
  if (f.go) s += " (C's malloc only: Go's own heap is not seen)";
  for (const auto& m : f.more) s += m;
  snprintf(b, sizeof b, " | stop %.0f ms (symbols %.0f ms", f.stop_ms, f.symbolize_ms);
  s += b;
  if (f.names_cut) {
    snprintf(b, sizeof b, ", cut at the time budget: %llu addresses unnamed", (unsigned long long)f.names_cut);
    s += b;
  }
  s += ")";
  if (f.symbols_cached + f.symbols_looked_up) {
    snprintf(b, sizeof b, " | %llu of %llu addresses from the symbol cache", (unsigned long long)f.symbols_cached,
             (unsigned long long)(f.symbols_cached + f.symbols_looked_up));
    s += b;
  }
  if (!f.unnamed.empty()) s += " | " + f.unnamed;
  if (f.snapshots) {
    snprintf(b, sizeof b, " | %llu snapshot%s: ", (unsigned long long)f.snapshots, f.snapshots == 1 ? "" : "s");
    s += b + f.first_snapshot;
    if (f.snapshots > 1) s += " to " + f.last_snapshot;
    snprintf(b, sizeof b, " (%llu kept)", (unsigned long long)f.snapshots_kept);
    s += b;
  }
  if (f.peaks) {
    snprintf(b, sizeof b, " | %llu heap peak%s written", (unsigned long long)f.peaks, f.peaks == 1 ? "" : "s");
    s += b;
  }
  if (f.fatal_deferred) {
    snprintf(b, sizeof b, " | %llu fatal signal%s deferred", (unsigned long long)f.fatal_deferred,
             f.fatal_deferred == 1 ? "" : "s");
    s += b;
  }
  if (!f.who.empty()) s += " | " + f.who;
  return s;
}

}  // namespace summary
