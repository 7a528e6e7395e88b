// sigapi: what the signal API costs (tests/bench/bench.py, "Threads and the
// signal API"). PAIRS times: signal(SIGPIPE, ...) alternately to SIG_IGN and
// back to SIG_DFL, and pthread_sigmask alternately blocking and unblocking
// SIGUSR2 — what libcurl does around every transfer step (it ignores SIGPIPE
// and restores the old action), and what a SysV handler re-arming itself
// does at every signal.
//
// usage: sigapi FD [PAIRS]   (default 200000)
// FD: "loop_s S cpu_s C\n", the loop's wall time and the process's CPU time
// over it, so that process start and a profiler's stop are not in them.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: sigapi FD [PAIRS]\n");
    return 2;
  }
  int fd = atoi(argv[1]);
  long n = argc > 2 ? atol(argv[2]) : 200000;
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
  for (long i = 0; i < n; i++) {
    if (signal(SIGPIPE, (i & 1) ? SIG_DFL : SIG_IGN) == SIG_ERR ||
        pthread_sigmask((i & 1) ? SIG_UNBLOCK : SIG_BLOCK, &usr2, NULL) != 0) {
      fprintf(stderr, "sigapi: call %ld failed\n", i);
      return 1;
    }
  }
  double t1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_PROCESS_CPUTIME_ID);
  dprintf(fd, "loop_s %.6f cpu_s %.6f\n", t1 - t0, c1 - c0);
  return 0;
}
