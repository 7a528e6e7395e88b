/* sigq_quota: starts N threads that sleep, then queues Q real-time signals
 * to itself while it blocks them (each pending one counts against the
 * user's RLIMIT_SIGPENDING) and creates one timer, and prints how many
 * succeeded (argv: N Q). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void* sleeper(void* arg) {
  sleep(3);
  return arg;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 60, q = argc > 2 ? atoi(argv[2]) : 40;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGRTMIN + 1);
  sigprocmask(SIG_BLOCK, &set, NULL);
  pthread_t* t = calloc(n, sizeof *t);
  int started = 0;
  for (int i = 0; i < n; ++i) started += pthread_create(&t[i], NULL, sleeper, NULL) == 0;
  usleep(100000);
  int queued = 0;
  for (int i = 0; i < q; ++i) {
    union sigval v = {.sival_int = i};
    queued += sigqueue(getpid(), SIGRTMIN + 1, v) == 0;
  }
  struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN + 1};
  timer_t timer;
  int timer_ok = timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0;
  printf("threads %d of %d, queued %d of %d, timer %s\n", started, n, queued, q, timer_ok ? "ok" : "failed");
  fflush(stdout);
  _exit(0);
}
