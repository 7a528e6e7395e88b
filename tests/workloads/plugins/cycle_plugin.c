// cycle_plugin: the plugin tests/workloads/dl_cycles.c loads and unloads
// thousands of times (tests/integration/test_cpu_frames.py builds it with
// cc -shared -fPIC -g). cycle_work burns about `us` microseconds of the
// calling thread's CPU, so every cycle does some work in the plugin.
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline, noclone)) unsigned long cycle_work(long us) {
  struct timespec t0, t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  unsigned long x = sink;
  do {
    for (int i = 0; i < 500; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
  return x;
}
