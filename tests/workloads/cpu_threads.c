// cpu_threads: two threads burn the same amount of CPU concurrently, one in
// burn_a (called from worker_a), one in burn_b (from worker_b); main only
// waits. Every thread must be sampled: each worker gets about half of the
// CPU samples, and the total matches the process's CPU time.
// usage: cpu_threads [units [report]]   default 600 units of ~1.5 ms per thread
//   report: also print "truth main cpu_seconds=..." (process CPU time of the work).
// stdout: one line with a checksum.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNIT 1500000UL

static volatile unsigned long sink_a, sink_b;
static unsigned long units = 600;

__attribute__((noinline, noclone)) void burn_a(unsigned long n) {
  unsigned long x = sink_a;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink_a = x;
  }
}

__attribute__((noinline, noclone)) void burn_b(unsigned long n) {
  unsigned long x = sink_b;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 2862933555777941757UL + 3037000493UL;
    sink_b = x;
  }
}

__attribute__((noinline, noclone)) void* worker_a(void* arg) {
  for (unsigned long u = 0; u < units; u++) burn_a(UNIT);
  return arg;
}

__attribute__((noinline, noclone)) void* worker_b(void* arg) {
  for (unsigned long u = 0; u < units; u++) burn_b(UNIT);
  return arg;
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc > 1) units = strtoul(argv[1], NULL, 10);
  int report = argc > 2 && strcmp(argv[2], "report") == 0;
  double t0 = cpu_seconds();
  sink_a = 1;
  sink_b = 2;
  pthread_t a, b;
  if (pthread_create(&a, NULL, worker_a, NULL) || pthread_create(&b, NULL, worker_b, NULL)) {
    perror("pthread_create");
    return 1;
  }
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  double t1 = cpu_seconds();
  printf("cpu_threads: units=%lu checksum=%016lx\n", units, sink_a ^ sink_b);
  if (report) printf("truth main cpu_seconds=%.6f\n", t1 - t0);
  return 0;
}
