// snap_burn: a running program to take snapshots of.
//   snap_burn phases MS   burns MS ms of its own CPU in burn_a, then reads a
//                         line from stdin, the same in burn_b, reads a line,
//                         then burn_c; prints "phase X done" after each and
//                         "truth run cpu_nanos=N" (its thread's CPU), exits 3
//   snap_burn idle        prints "ready", then sleeps until a signal ends it
// A read that fails (EINTR) is printed and ends the program with status 9:
// a snapshot signal must not show through.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long long thread_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static volatile unsigned long sink;

static void spin(long ms) {
  unsigned long long end = thread_ns() + (unsigned long long)ms * 1000000ull;
  unsigned long x = sink;
  while (thread_ns() < end)
    for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
}

__attribute__((noinline, noclone)) void burn_a(long ms) { spin(ms); }
__attribute__((noinline, noclone)) void burn_b(long ms) { spin(ms); }
__attribute__((noinline, noclone)) void burn_c(long ms) { spin(ms); }

static void wait_line(void) {
  char buf[64];
  ssize_t r = read(0, buf, sizeof buf);
  if (r < 0) {
    printf("read failed: %s\n", strerror(errno));
    exit(9);
  }
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "idle") == 0) {
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
  }
  if (argc != 3 || strcmp(argv[1], "phases") != 0) {
    fprintf(stderr, "usage: snap_burn phases MS | snap_burn idle\n");
    return 2;
  }
  long ms = strtol(argv[2], NULL, 10);
  burn_a(ms);
  printf("phase a done\n");
  fflush(stdout);
  wait_line();
  burn_b(ms);
  printf("phase b done\n");
  fflush(stdout);
  wait_line();
  burn_c(ms);
  printf("phase c done\ntruth run cpu_nanos=%llu\n", thread_ns());
  return 3;
}
