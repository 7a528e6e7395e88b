// fork_burst: a forking server's parent. It touches HOLD_MIB MiB (so each
// fork copies page tables), forks N children, K at a time, each ending at
// once with _exit(0), waits for them, then burns ~0.1 s of CPU in
// parent_work.
// usage: fork_burst N K HOLD_MIB
// stdout: "truth forks cpu_ns=C" (the main thread's CPU over the fork
//         phase), "truth parent_work cpu_ns=C".
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static long long thread_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline, noclone)) void parent_work(void) {
  long long end = thread_ns() + 100000000LL;
  unsigned long x = sink;
  while (thread_ns() < end)
    for (int i = 0; i < 2000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
  sink = x;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: fork_burst N K HOLD_MIB\n");
    return 2;
  }
  int n = atoi(argv[1]), k = atoi(argv[2]);
  size_t hold = (size_t)atoi(argv[3]) << 20;
  char* mem = malloc(hold);
  if (!mem) return 1;
  memset(mem, 1, hold);
  long long t0 = thread_ns();
  for (int started = 0, running = 0; started < n || running > 0;) {
    if (started < n && running < k) {
      pid_t pid = fork();
      if (pid < 0) { perror("fork"); return 1; }
      if (pid == 0) _exit(0);
      started++, running++;
    } else if (wait(NULL) > 0) {
      running--;
    }
  }
  long long t1 = thread_ns();
  parent_work();
  long long t2 = thread_ns();
  printf("truth forks cpu_ns=%lld\ntruth parent_work cpu_ns=%lld\n", t1 - t0, t2 - t1);
  free(mem);
  return 0;
}
