// cpu_short_threads: many short-lived threads, one after another, as a
// thread-per-task server or a crawler with a thread per fetch makes them.
// Each thread runs short_task, which burns CPU in short_burn until its own
// thread CPU clock has reached MS milliseconds, and ends; main starts the
// next only when it has joined the previous one, so each thread lives a few
// milliseconds of CPU and most end before the kernel's tick (4 ms at 250 Hz)
// delivers a single timer signal to them.
// usage: cpu_short_threads N MS
// stdout: "truth thread tid=T cpu_ns=C" per thread (CLOCK_THREAD_CPUTIME_ID at
//         the end of short_task: all the thread's CPU but its exit),
//         "truth threads n=N cpu_ns=SUM" (their sum),
//         "truth process cpu_ns=C" (CLOCK_PROCESS_CPUTIME_ID at the end of main).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static long long burn_ns;

struct Task {
  pid_t tid;
  long long cpu_ns;
};

static long long clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline, noclone)) void short_burn(void) {
  unsigned long x = sink;
  while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < burn_ns) {
    for (int i = 0; i < 2000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
}

__attribute__((noinline, noclone)) void* short_task(void* p) {
  struct Task* t = p;
  t->tid = (pid_t)syscall(SYS_gettid);
  short_burn();
  t->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: cpu_short_threads N MS\n");
    return 2;
  }
  int n = atoi(argv[1]);
  burn_ns = (long long)(atof(argv[2]) * 1e6);
  struct Task* tasks = calloc((size_t)n, sizeof *tasks);
  if (!tasks) return 1;
  for (int i = 0; i < n; i++) {
    pthread_t th;
    if (pthread_create(&th, NULL, short_task, &tasks[i]) != 0 || pthread_join(th, NULL) != 0) {
      fprintf(stderr, "cpu_short_threads: thread %d failed\n", i);
      return 1;
    }
  }
  long long sum = 0;
  for (int i = 0; i < n; i++) {
    printf("truth thread tid=%d cpu_ns=%lld\n", (int)tasks[i].tid, tasks[i].cpu_ns);
    sum += tasks[i].cpu_ns;
  }
  printf("truth threads n=%d cpu_ns=%lld\n", n, sum);
  printf("truth process cpu_ns=%lld\n", clock_ns(CLOCK_PROCESS_CPUTIME_ID));
  free(tasks);
  return 0;
}
