// summary: the one line, field by field, as docs/CONFIG.md ("The summary
// line") describes it; readme() gives the line README.md shows (a real
// one, from the demo).
#include "summary.h"

#include "check.h"

namespace {

summary::Figures readme() {
  summary::Figures f;
  f.files = {"/tmp/prof/288w-6writers.cpu.pprof", "/tmp/prof/288w-6writers.heap.pprof"};
  f.hz = 100;
  f.samples = 143;
  f.profiled_cpu_s = 1.4312;
  f.cpu_to_stop_s = 1.4338;
  f.wall_s = 2.181;
  f.peak_rss_bytes = uint64_t(58.0 * 1024 * 1024);
  f.heap_inuse_bytes = uint64_t(36.1 * 1024 * 1024);
  f.stop_ms = 67.2;
  f.symbolize_ms = 61.4;
  return f;
}

}  // namespace

TEST(readme_example) {
  CHECK_EQ(summary::format(readme()),
           std::string("wrote /tmp/prof/288w-6writers.cpu.pprof /tmp/prof/288w-6writers.heap.pprof"
                       " | cpu 1.43 s in 143 samples at 100 Hz"
                       " | process cpu 1.43 s to the stop, 0.00 s of it not in the profile"
                       " (nor is any cpu after the stop)"
                       " | wall 2.18 s | peak rss 58.0 MiB | heap in use 36.1 MiB | stop 67 ms (symbols 61 ms)"));
}

// The peak as the stop began, when known: what the stop added is the rest.
TEST(peak_before_the_stop) {
  summary::Figures f = readme();
  f.peak_rss_before_stop_bytes = 41ull << 20;
  const std::string s = summary::format(f);
  CHECK(s.find(" | peak rss 58.0 MiB (41.0 MiB before the stop) | heap in use ") != std::string::npos);
}

// Which image, last: what a reader of a build's log looks for.
TEST(who_comes_last) {
  summary::Figures f = readme();
  f.who = "pid 18258 (parent 18255): build/workloads/demo";
  std::string s = summary::format(f);
  CHECK(s.size() > f.who.size() && s.compare(s.size() - f.who.size() - 3, std::string::npos, " | " + f.who) == 0);
}

// The gap is the difference of the two figures as printed (4.13 - 4.10),
// not of the unrounded ones (0.0202 would print 0.02): the line adds up.
TEST(gap_adds_up_as_printed) {
  summary::Figures f = readme();
  f.profiled_cpu_s = 1.004, f.cpu_to_stop_s = 1.006;
  std::string s = summary::format(f);
  CHECK(s.find("cpu 1.00 s in") != std::string::npos);
  CHECK(s.find("process cpu 1.01 s to the stop, 0.01 s of it not in the profile") != std::string::npos);
}

// A profile can hold a hair more than the process clock read after it
// (the two are read apart): the gap never prints negative.
TEST(gap_never_negative) {
  summary::Figures f = readme();
  f.profiled_cpu_s = 2.0, f.cpu_to_stop_s = 1.98;
  CHECK(summary::format(f).find(", 0.00 s of it not in the profile") != std::string::npos);
}

TEST(cpu_profile_off) {
  summary::Figures f = readme();
  f.hz = 0;
  std::string s = summary::format(f);
  CHECK(s.find(" | cpu profile off | process cpu 1.43 s to the stop | wall 2.18 s |") != std::string::npos);
  CHECK(s.find("not in the profile") == std::string::npos);
}

TEST(losses_are_said) {
  summary::Figures f = readme();
  f.dropped = 3, f.dropped_s = 0.03, f.unsampled_threads = 2;
  CHECK(summary::format(f).find("at 100 Hz, 2 threads unsampled (no timer), 3 dropped (0.03 s of cpu not in "
                                "the profile) | process cpu") != std::string::npos);
}

TEST(no_file_written) {
  summary::Figures f = readme();
  f.files.clear();
  CHECK(summary::format(f).rfind("wrote no profile | cpu 1.43 s", 0) == 0);
}

// While running: the snapshots and heap peaks an image wrote, counted, the
// first and last set named by their stem; nothing when there were none.
TEST(snapshots_and_peaks) {
  summary::Figures f = readme();
  CHECK(summary::format(f).find("snapshot") == std::string::npos);
  f.snapshots = 3, f.snapshots_kept = 2, f.peaks = 1;
  f.first_snapshot = "/tmp/prof/x.1.*", f.last_snapshot = "/tmp/prof/x.3.*";
  std::string s = summary::format(f);
  CHECK(s.find(" | 3 snapshots: /tmp/prof/x.1.* to /tmp/prof/x.3.* (2 kept) | 1 heap peak written") !=
        std::string::npos);
  f.snapshots = 1, f.snapshots_kept = 1, f.peaks = 0;
  f.last_snapshot = f.first_snapshot;
  s = summary::format(f);
  CHECK(s.find(" | 1 snapshot: /tmp/prof/x.1.* (1 kept)") != std::string::npos);
  CHECK(s.find("heap peak") == std::string::npos);
}

// Deferred fatal signals: said only when there were any, before the image.
TEST(fatal_signals_deferred) {
  summary::Figures f = readme();
  CHECK(summary::format(f).find("deferred") == std::string::npos);
  f.who = "pid 1 (parent 0): x";
  f.fatal_deferred = 1;
  std::string one = summary::format(f);
  CHECK(one.find(" | 1 fatal signal deferred | pid 1 ") != std::string::npos);
  f.fatal_deferred = 3;
  CHECK(summary::format(f).find(" | 3 fatal signals deferred | pid 1 ") != std::string::npos);
}
