/* term_at_exit: a forked child burns some CPU and returns from main; its
 * parent sends it SIGTERM DELAY_US after the child said it is returning
 * (while the shim's stop for that return may still run), as a worker pool
 * tells its workers to go while they exit. Prints how long the parent
 * waited and how the child ended.
 *   term_at_exit [DELAY_US]   (default 0) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  int delay_us = argc > 1 ? atoi(argv[1]) : 0;
  int p[2];
  if (pipe(p) != 0) return 1;
  pid_t c = fork();
  if (c == 0) {
    volatile double x = 0;
    for (long i = 0; i < 20000000; i++) x += i;
    if (write(p[1], "x", 1) != 1) return 1;
    return 0;
  }
  char b;
  if (read(p[0], &b, 1) != 1) return 1;
  usleep(delay_us);
  double t0 = now();
  kill(c, SIGTERM);
  int st;
  waitpid(c, &st, 0);
  printf("waited %.3f s, %s %d\n", now() - t0, WIFSIGNALED(st) ? "signal" : "exit",
         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  return 0;
}
