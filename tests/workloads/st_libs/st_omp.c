// st_omp: an OpenMP parallel region of 4 threads (libgomp's own thread pool),
// each burning SECONDS of its CPU in omp_burn (compiled at run time with
// -fopenmp by tests/integration/test_cpu_threads.py).
// usage: st_omp [SECONDS]   default 0.5
// stdout: "truth thread name=omp-K tid=T cpu_ns=C" per thread, "truth process cpu_ns=C".
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink[4 * 8];
static int tids[4];
static long long cpu[4];

static long long clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline, noclone)) void omp_burn(int k, double seconds) {
  long long end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + (long long)(seconds * 1e9);
  unsigned long x = sink[k * 8];
  while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
    for (int i = 0; i < 100000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink[k * 8] = x;
  }
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.5;
#pragma omp parallel num_threads(4)
  {
    int k = omp_get_thread_num();
    tids[k] = (int)syscall(SYS_gettid);
    omp_burn(k, seconds);
    cpu[k] = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  }
  for (int k = 0; k < 4; k++) printf("truth thread name=omp-%d tid=%d cpu_ns=%lld\n", k, tids[k], cpu[k]);
  printf("truth process cpu_ns=%lld\n", clock_ns(CLOCK_PROCESS_CPUTIME_ID));
  return 0;
}
