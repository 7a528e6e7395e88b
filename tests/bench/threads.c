// threads: what creating and joining a thread costs (tests/bench/bench.py,
// "Threads and the signal API"). N times, one after another: pthread_create
// a thread that mallocs 64 blocks of 16 << (i % 10) bytes (16 B to 8 KiB,
// one size class per thread, ten in turn), touches and frees them; join it.
// The allocations matter: an allocator's per-thread caches are made at a
// thread's first malloc and torn down at its exit.
//
// usage: threads FD [N]   (default 20000)
// FD: "loop_s S cpu_s C\n", the loop's wall time (CLOCK_MONOTONIC) and the
// process's CPU time over it (CLOCK_PROCESS_CPUTIME_ID, which keeps the
// CPU of threads that ended), so that process start and a profiler's stop
// are not in the figures.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void* body(void* arg) {
  size_t n = (size_t)16 << ((size_t)arg % 10);
  char* p[64];
  for (int i = 0; i < 64; i++) {
    p[i] = malloc(n);
    if (!p[i]) abort();
    *(volatile char*)p[i] = 1;
  }
  for (int i = 0; i < 64; i++) free(p[i]);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: threads FD [N]\n");
    return 2;
  }
  int fd = atoi(argv[1]);
  long n = argc > 2 ? atol(argv[2]) : 20000;
  double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
  for (long i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, body, (void*)(size_t)i) != 0 || pthread_join(t, NULL) != 0) {
      fprintf(stderr, "threads: thread %ld failed\n", i);
      return 1;
    }
  }
  double t1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_PROCESS_CPUTIME_ID);
  dprintf(fd, "loop_s %.6f cpu_s %.6f\n", t1 - t0, c1 - c0);
  return 0;
}
