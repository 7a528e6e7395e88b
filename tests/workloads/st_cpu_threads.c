// st_cpu_threads: N named threads each burn the same CPU time; optionally one
// more thread only sleeps. Each burner runs st_burn until its own thread CPU
// clock reaches SECONDS, so every thread gets exactly the same CPU whatever
// the scheduler does (8 threads on 2 cores: each runs a quarter of the time).
// usage: st_cpu_threads N SECONDS [sleeper]
//   threads are named burn-0 .. burn-N-1 (pthread_setname_np); the sleeper is
//   named "sleeper" and blocks in read() of a pipe, in st_sleep_only, until
//   the burners are done.
// stdout: "truth thread name=burn-K tid=T cpu_ns=C" per burner,
//         "truth thread name=sleeper tid=T cpu_ns=C" for the sleeper,
//         "truth process cpu_ns=C" (CLOCK_PROCESS_CPUTIME_ID at the end of main:
//         all the program's CPU, which the profile must account for).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXT 64

static volatile unsigned long sink[MAXT * 8];
static double seconds = 2.0;
static int pipefd[2];

struct Info {
  int index;
  pid_t tid;
  long long cpu_ns;
  char name[16];
};
static struct Info info[MAXT + 1];

static long long clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline, noclone)) void st_burn(int k) {
  long long end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + (long long)(seconds * 1e9);
  unsigned long x = sink[k * 8];
  while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
    for (int i = 0; i < 100000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink[k * 8] = x;
  }
}

__attribute__((noinline, noclone)) void st_sleep_only(void) {
  char c;
  while (read(pipefd[0], &c, 1) < 0) {
  }
}

static void* burner(void* p) {
  struct Info* in = p;
  in->tid = (pid_t)syscall(SYS_gettid);
  pthread_setname_np(pthread_self(), in->name);
  st_burn(in->index);
  in->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  return NULL;
}

static void* sleeper(void* p) {
  struct Info* in = p;
  in->tid = (pid_t)syscall(SYS_gettid);
  pthread_setname_np(pthread_self(), in->name);
  st_sleep_only();
  in->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  return NULL;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8;
  if (n < 1 || n > MAXT) n = 8;
  if (argc > 2) seconds = atof(argv[2]);
  int with_sleeper = argc > 3 && !strcmp(argv[3], "sleeper");
  if (pipe(pipefd) != 0) { perror("pipe"); return 1; }
  pthread_t t[MAXT + 1];
  if (with_sleeper) {
    snprintf(info[MAXT].name, sizeof info[MAXT].name, "sleeper");
    pthread_create(&t[MAXT], NULL, sleeper, &info[MAXT]);
  }
  for (int i = 0; i < n; i++) {
    info[i].index = i;
    snprintf(info[i].name, sizeof info[i].name, "burn-%d", i);
    if (pthread_create(&t[i], NULL, burner, &info[i]) != 0) { perror("pthread_create"); return 1; }
  }
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  if (with_sleeper) {
    if (write(pipefd[1], "x", 1) != 1) perror("write");
    pthread_join(t[MAXT], NULL);
  }
  for (int i = 0; i < n; i++)
    printf("truth thread name=%s tid=%d cpu_ns=%lld\n", info[i].name, (int)info[i].tid, info[i].cpu_ns);
  if (with_sleeper)
    printf("truth thread name=%s tid=%d cpu_ns=%lld\n", info[MAXT].name, (int)info[MAXT].tid,
           info[MAXT].cpu_ns);
  printf("truth process cpu_ns=%lld\n", clock_ns(CLOCK_PROCESS_CPUTIME_ID));
  return 0;
}
