// cpu_split: burns CPU in two non-inlined functions in an exact 3:1 ratio,
// single thread, ~2 s. The work is interleaved: each cycle runs 3 units in
// hot_a, then 1 unit in hot_b, all of the same length u. u is drawn from a
// fixed pseudo-random sequence (0.5..1.5 ms), so the cycle length never locks
// onto the sampling period (a fixed cycle of 6 ms sampled every 4 ms would
// always land in hot_a), while the totals stay exactly 3:1. The two loops are
// the same instructions, so equal iteration counts cost equal time.
// usage: cpu_split [cycles [report]]   default 333 cycles (~2 s)
//   report: also print "truth cpu_seconds=..." (this process's CPU time from
//   the start of main to the end of the work), which is not deterministic.
// stdout: one line with the work done and a checksum (deterministic).
// stderr: one line "cpu_split: done" (so stderr comparisons are meaningful).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNIT 1500000UL /* iterations, ~1.5 ms */

static volatile unsigned long sink_a, sink_b;

__attribute__((noinline, noclone)) void hot_a(unsigned long n) {
  unsigned long x = sink_a;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink_a = x;
  }
}

__attribute__((noinline, noclone)) void hot_b(unsigned long n) {
  unsigned long x = sink_b;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 2862933555777941757UL + 3037000493UL;
    sink_b = x;
  }
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  unsigned long cycles = argc > 1 ? strtoul(argv[1], NULL, 10) : 333;
  int report = argc > 2 && strcmp(argv[2], "report") == 0;
  double t0 = cpu_seconds();
  unsigned long rng = 0x2545F4914F6CDD1DUL, total_a = 0, total_b = 0;
  sink_a = 1;
  sink_b = 2;
  for (unsigned long c = 0; c < cycles; c++) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    unsigned long u = UNIT / 2 + rng % UNIT;
    hot_a(u);
    hot_a(u);
    hot_a(u);
    hot_b(u);
    total_a += 3 * u;
    total_b += u;
  }
  double t1 = cpu_seconds();
  printf("cpu_split: cycles=%lu iterations_a=%lu iterations_b=%lu checksum=%016lx\n", cycles, total_a,
         total_b, sink_a ^ sink_b);
  if (report) printf("truth main cpu_seconds=%.6f\n", t1 - t0);
  fprintf(stderr, "cpu_split: done\n");
  return 0;
}
