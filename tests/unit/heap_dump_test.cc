// heap_dump: parsing jemalloc's heap_v2 text and jeprof's unsampling.
#include "check.h"
#include "heap_dump.h"

#include <cmath>
#include <cstdio>

namespace {
// A dump as jemalloc 5.3 writes it (trimmed): 48 sampled of 50 live 4 KiB
// blocks at a 1 KiB period, and a stack with freed objects only.
const char kDump[] =
    "heap_v2/1024\n"
    "  t*: 50: 285281 [98: 486900]\n"
    "  t0: 50: 285281 [98: 486900]\n"
    "@ 0x10 0x20 0x30\n"
    "  t*: 48: 200952 [96: 401903]\n"
    "  t0: 48: 200952 [96: 401903]\n"
    "@ 0x40 0x50\n"
    "  t*: 0: 0 [7: 700000]\n"
    "  t0: 0: 0 [7: 700000]\n"
    "\n"
    "MAPPED_LIBRARIES:\n"
    "559763252000-55976325b000 r--p 00000000 fe:00 10953521   /tmp/jt\n";
}  // namespace

TEST(parses_records_and_period) {
  heap_dump::Dump d;
  std::string err;
  CHECK(heap_dump::parse(kDump, &d, &err));
  CHECK_EQ(d.period, uint64_t(1024));
  CHECK_EQ(d.records.size(), size_t(2));
  CHECK_EQ(d.records[0].pcs.size(), size_t(3));
  CHECK_EQ(d.records[0].pcs[2], uint64_t(0x30));
  CHECK_EQ(d.records[1].inuse_space, 0.0);
  CHECK(d.records[1].alloc_space >= 700000.0);
}

TEST(unsampled_estimate_recovers_truth) {
  heap_dump::Dump d;
  std::string err;
  CHECK(heap_dump::parse(kDump, &d, &err));
  // Truth: 50 live blocks of 4096 bytes = 204800.
  CHECK(std::fabs(d.records[0].inuse_space - 204800.0) / 204800.0 < 0.01);
  CHECK(std::fabs(d.records[0].inuse_objects - 50.0) < 1.5);
}

TEST(unsample_formula) {
  double n, s;
  heap_dump::unsample(1, 1024, 1024, &n, &s);  // x/period = 1: scale 1/(1-e^-1)
  CHECK(std::fabs(s - 1024.0 / (1.0 - std::exp(-1.0))) < 1e-6);
  heap_dump::unsample(1, 1 << 30, 1024, &n, &s);  // huge objects: always sampled
  CHECK(std::fabs(s - double(1 << 30)) < 1.0);
  heap_dump::unsample(0, 0, 1024, &n, &s);
  CHECK_EQ(s, 0.0);
}

TEST(rejects_other_text) {
  heap_dump::Dump d;
  std::string err;
  CHECK(!heap_dump::parse("heap profile: 1: 2 [3: 4] @ heapprofile\n", &d, &err));
  CHECK(!err.empty());
}

TEST(large_dump_parses_in_linear_time) {
  // 40k stacks of 24 frames, 8 threads each: ~23 MB, as a long-running
  // service with prof_accum keeps. A quadratic parse took seconds here.
  std::string t = "heap_v2/524288\n  t*: 1: 2 [3: 4]\n";
  char buf[64];
  for (int i = 0; i < 40000; ++i) {
    t += "@";
    for (int f = 0; f < 24; ++f) {
      snprintf(buf, sizeof buf, " 0x%x", 0x400000 + i * 24 + f);
      t += buf;
    }
    t += "\n  t*: 3: 3072 [5: 5120]\n";
    for (int th = 0; th < 8; ++th) {
      snprintf(buf, sizeof buf, "  t%d: 1: 1024 [1: 1024]\n", th);
      t += buf;
    }
  }
  heap_dump::Dump d;
  std::string err;
  double t0 = check::thread_cpu_seconds();
  CHECK(heap_dump::parse(t, &d, &err));
  double s = check::thread_cpu_seconds() - t0;
  CHECK_EQ(d.records.size(), size_t(40000));
  CHECK(s < 3.0);
  std::printf("  40k-record dump (%zu MB) parsed in %.3f s of CPU\n", t.size() >> 20, s);
}
