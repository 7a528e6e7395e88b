// renames: one worker thread works in three phases under three names, each
// given another way: phase-a by its own pthread_setname_np, phase-b by its
// own prctl(PR_SET_NAME), phase-c by main's pthread_setname_np on it (glibc
// writes /proc/self/task/TID/comm for another thread). In each phase it
// burns ~0.4 s of CPU in burn() and sleeps twice 150 ms.
// usage: renames [cpu_ms_per_phase]
// stdout: "truth NAME cpu_ns=N sleep_ns=N" per phase, by the worker's own
// clocks (CLOCK_THREAD_CPUTIME_ID, CLOCK_MONOTONIC), measured from the
// rename to the next one.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static unsigned long cpu_ms = 400;
static pthread_barrier_t renamed, phase_done;

static unsigned long long now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

__attribute__((noinline, noclone)) void burn(unsigned long long until_cpu) {
  unsigned long x = sink;
  while (now(CLOCK_THREAD_CPUTIME_ID) < until_cpu)
    for (int i = 0; i < 100000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
  sink = x;
}

// The work of one phase, started just after the thread got its name: the
// CPU and the sleeping it did under that name.
static void phase(const char* name) {
  unsigned long long c0 = now(CLOCK_THREAD_CPUTIME_ID), slept = 0;
  burn(c0 + cpu_ms * 1000000ull / 2);
  for (int i = 0; i < 2; i++) {
    unsigned long long m0 = now(CLOCK_MONOTONIC);
    usleep(150000);
    slept += now(CLOCK_MONOTONIC) - m0;
  }
  burn(c0 + cpu_ms * 1000000ull);
  printf("truth %s cpu_ns=%llu sleep_ns=%llu\n", name, now(CLOCK_THREAD_CPUTIME_ID) - c0, slept);
  fflush(stdout);
}

static void* worker(void* arg) {
  pthread_setname_np(pthread_self(), "phase-a");
  phase("phase-a");
  prctl(PR_SET_NAME, "phase-b", 0, 0, 0);
  phase("phase-b");
  pthread_barrier_wait(&phase_done);
  pthread_barrier_wait(&renamed);  // main names it phase-c
  phase("phase-c");
  return arg;
}

int main(int argc, char** argv) {
  if (argc > 1) cpu_ms = strtoul(argv[1], NULL, 10);
  pthread_barrier_init(&renamed, NULL, 2);
  pthread_barrier_init(&phase_done, NULL, 2);
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL)) {
    perror("pthread_create");
    return 1;
  }
  pthread_barrier_wait(&phase_done);
  if (pthread_setname_np(t, "phase-c")) {
    perror("pthread_setname_np");
    return 1;
  }
  pthread_barrier_wait(&renamed);
  pthread_join(t, NULL);
  return 0;
}
