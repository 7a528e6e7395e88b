// burn_threads: N threads each burn S seconds of their own CPU time (measured
// on the thread's CPU clock, so the true total is N*S whatever the machine's
// load), concurrently; main only waits. The per-thread CPU accuracy section
// of docs/BENCHMARKS.md runs it with 8 threads on a 2-core machine, so more
// threads are runnable than there are cores, as in a real server.
// usage: burn_threads [THREADS [SECONDS]]   defaults 8 threads, 1.0 s each
// stdout: one line with the thread count and a checksum.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds_each = 1.0;
static volatile uint64_t sink;

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t burn_step(uint64_t x) {
  for (unsigned i = 0; i < 100000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

__attribute__((noinline)) static void* burner(void* arg) {
  uint64_t x = (uint64_t)(uintptr_t)arg;
  while (thread_cpu() < seconds_each) x = burn_step(x);
  sink ^= x;
  return NULL;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8;
  if (argc > 2) seconds_each = atof(argv[2]);
  if (n < 1 || n > 256) return 2;
  pthread_t t[256];
  for (int i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, burner, (void*)(uintptr_t)(i + 1))) {
      perror("pthread_create");
      return 1;
    }
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  printf("burn_threads: threads=%d seconds_each=%.3f checksum=%016llx\n", n, seconds_each,
         (unsigned long long)sink);
  return 0;
}
