// fatal_deferral: a program that is busy when SIGTERM comes from outside, in
// one of three shapes, printing numbered lines, each stamped with
// CLOCK_MONOTONIC taken just before its write ("line N T"), so that a test
// can tell which lines were written after it sent the signal. "marker" once
// the shape is under way.
//   detach: main creates detached threads in a loop that end at once.
//   spawn:  main keeps creating threads that spin 50 ms.
// Main prints a line per thread (one printer: at most one line can be on
// its way when the process dies).
//   malloc: one thread calls malloc and free in a loop, and is the only
//           one that can take SIGTERM; main prints a line every millisecond.
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_long g_lines;

static void line(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char buf[64];
  int n = snprintf(buf, sizeof buf, "line %ld %lld\n", atomic_fetch_add(&g_lines, 1) + 1,
                   (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec);
  if (write(1, buf, (size_t)n) != n) _exit(3);
}

static void marker(void) {
  static const char m[] = "marker\n";
  if (write(1, m, sizeof m - 1) < 0) _exit(3);
}

static void* nothing(void* arg) { return arg; }

static void* spinner(void* arg) {
  (void)arg;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do clock_gettime(CLOCK_MONOTONIC, &t);
  while ((t.tv_sec - t0.tv_sec) * 1000000000ll + (t.tv_nsec - t0.tv_nsec) < 50000000ll);
  return NULL;
}

static void* churner(void* arg) {
  (void)arg;
  for (size_t i = 0;; ++i) {
    void* volatile p = malloc(16 + (i & 255));
    free(p);
  }
  return NULL;
}

static void create(void* (*fn)(void*)) {
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  while (pthread_create(&t, &a, fn, NULL) != 0) usleep(1000);  // at the thread limit: again
  pthread_attr_destroy(&a);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "detach") || !strcmp(mode, "spawn")) {
    void* (*fn)(void*) = mode[0] == 'd' ? nothing : spinner;
    for (long i = 0;; ++i) {
      if (i == 200) marker();
      create(fn);
      line();
    }
  }
  if (!strcmp(mode, "malloc")) {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    create(churner);
    pthread_sigmask(SIG_BLOCK, &term, NULL);  // SIGTERM goes to the churner
    struct timespec ms = {0, 1000000};
    for (long i = 0;; ++i) {
      if (i == 200) marker();
      line();
      nanosleep(&ms, NULL);
    }
  }
  fprintf(stderr, "usage: fatal_deferral detach|spawn|malloc\n");
  return 2;
}
