// atexit_burn: CPU spent after the stop. main burns MAIN seconds of CPU in
// main_burn and returns; an atexit handler, which runs after the shim's stop
// (the profiles are written before the program's teardown), burns EXIT
// seconds in teardown_burn. The profile cannot hold the handler's CPU; the
// summary line must say what the profile covers and that this is not in it.
// usage: atexit_burn MAIN EXIT
// stdout: "truth main cpu_ns=C" (CLOCK_PROCESS_CPUTIME_ID as main returns),
//         "truth atexit cpu_ns=C" (the handler's CPU, by the thread's clock).
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;
static double exit_seconds;

static long long clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long burn(double seconds) {
  long long t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t;
  unsigned long x = sink;
  while ((t = clock_ns(CLOCK_THREAD_CPUTIME_ID)) - t0 < (long long)(seconds * 1e9)) {
    for (int i = 0; i < 10000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
  return t - t0;
}

__attribute__((noinline, noclone)) void main_burn(double seconds) { burn(seconds); }

__attribute__((noinline, noclone)) long long teardown_burn(double seconds) { return burn(seconds); }

static void at_exit(void) {
  long long ns = teardown_burn(exit_seconds);
  printf("truth atexit cpu_ns=%lld\n", ns);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: atexit_burn MAIN EXIT\n");
    return 2;
  }
  exit_seconds = atof(argv[2]);
  atexit(at_exit);
  main_burn(atof(argv[1]));
  printf("truth main cpu_ns=%lld\n", clock_ns(CLOCK_PROCESS_CPUTIME_ID));
  return 0;
}
