// waitcost: what the wait profile costs a program (tests/bench/waits.py).
// Each mode times its own loop from inside, so process start and the stop
// are not in the figures.
//
// usage: waitcost FD mutex N          N lock/unlock pairs of one uncontended
//                                     mutex (a counter increment inside)
//        waitcost FD write N          N write()s of 1 byte to /dev/null
//        waitcost FD threads T S DEPTH US
//                                     T threads, each DEPTH frames deep,
//                                     blocked in nanosleep(US microseconds)
//                                     over and over for S seconds: blocked
//                                     nearly all the time, in short waits
// FD: "loop_s S cpu_s C waits W\n": the loop's wall time (CLOCK_MONOTONIC),
// the process's CPU time over it (CLOCK_PROCESS_CPUTIME_ID) and the number
// of blocking calls made.
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile long counter;

static long mutex_loop(long n) {
  for (long i = 0; i < n; i++) {
    pthread_mutex_lock(&lock);
    counter++;
    pthread_mutex_unlock(&lock);
  }
  return n;
}

static long write_loop(long n) {
  int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return perror("open /dev/null"), -1;
  for (long i = 0; i < n; i++)
    if (write(fd, "x", 1) != 1) return perror("write"), -1;
  close(fd);
  return n;
}

static atomic_int stop;
static atomic_long waits;
static long wait_us;

// DEPTH frames of the program's own before the wait, as a service's stack.
__attribute__((noinline)) static long deep(int depth) {
  if (depth > 0) {
    long r = deep(depth - 1);
    __asm__ volatile("" ::: "memory");  // not a tail call: the frame stays
    return r;
  }
  struct timespec ts = {0, wait_us * 1000};
  long n = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    nanosleep(&ts, NULL);
    n++;
  }
  return n;
}

static void* waiter(void* arg) {
  atomic_fetch_add(&waits, deep((int)(long)arg));
  return NULL;
}

static long threads_loop(int t, double seconds, int depth) {
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 256 * 1024);
  pthread_t* th = calloc(t, sizeof *th);
  for (int i = 0; i < t; i++)
    if (pthread_create(&th[i], &a, waiter, (void*)(long)depth) != 0) return perror("pthread_create"), -1;
  struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
  free(th);
  return atomic_load(&waits);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: waitcost FD mutex|write N | waitcost FD threads T SECONDS DEPTH US\n");
    return 2;
  }
  int fd = atoi(argv[1]);
  const char* mode = argv[2];
  double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
  long n;
  if (strcmp(mode, "mutex") == 0) {
    n = mutex_loop(atol(argv[3]));
  } else if (strcmp(mode, "write") == 0) {
    n = write_loop(atol(argv[3]));
  } else if (strcmp(mode, "threads") == 0 && argc >= 7) {
    wait_us = atol(argv[6]);
    n = threads_loop(atoi(argv[3]), atof(argv[4]), atoi(argv[5]));
  } else {
    fprintf(stderr, "waitcost: unknown mode %s\n", mode);
    return 2;
  }
  double t1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_PROCESS_CPUTIME_ID);
  if (n < 0) return 1;
  dprintf(fd, "loop_s %.6f cpu_s %.6f waits %ld\n", t1 - t0, c1 - c0, n);
  return 0;
}
