// mallocs: what concurrent allocation costs (tests/bench/bench.py, "Threads
// and the signal API"). T threads at once, each N times: free a random one
// of 4096 live blocks and malloc a new one in its place, 7 in 8 of 16–527
// bytes and 1 in 8 of 16 B–64 KiB, touching its first bytes. Reported
// without a target: it shows what sharing one jemalloc arena costs
// (docs/ALLOCATOR.md).
//
// usage: mallocs FD T N
// FD: "loop_s S cpu_s C\n", the wall time from the threads' start to their
// join and the process's CPU time over it.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long g_iters;

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void* body(void* arg) {
  enum { K = 4096 };
  uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
  void** live = calloc(K, sizeof(void*));
  if (!live) abort();
  for (long i = 0; i < g_iters; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t size = (x & 7) == 0 ? (size_t)16 << ((x >> 8) % 13) : 16 + (x >> 8) % 512;
    size_t slot = (x >> 32) % K;
    free(live[slot]);
    live[slot] = malloc(size);
    if (!live[slot]) abort();
    memset(live[slot], 1, size < 64 ? size : 64);
  }
  for (int i = 0; i < K; i++) free(live[i]);
  free(live);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: mallocs FD THREADS N\n");
    return 2;
  }
  int fd = atoi(argv[1]), n = atoi(argv[2]);
  g_iters = atol(argv[3]);
  if (n < 1 || n > 256) return 2;
  pthread_t t[256];
  double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, body, (void*)(uintptr_t)(i + 1)) != 0) return 1;
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  double t1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_PROCESS_CPUTIME_ID);
  dprintf(fd, "loop_s %.6f cpu_s %.6f\n", t1 - t0, c1 - c0);
  return 0;
}
