// fork_many: a forking server in small. The parent forks N children one
// after another; each burns BURN_US microseconds of its own CPU in
// child_burn, allocates ALLOCS blocks of 64 KiB in child_alloc (freed), and
// ends with exit(0). Each child reports its CPU (its own process clock,
// from the fork to its exit call) through a pipe; the parent then burns
// ~50 ms in parent_work. The last child, with a mode:
//   linger MS  sleeps MS after the parent has ended, then burns and exits
//              (a child that outlives its parent; it reports before);
//   exec PATH  execs PATH with the argument "after" once it has burned.
// Or, with "kill", the parent SIGKILLs itself once its children are done.
// usage: fork_many N BURN_US ALLOCS [linger MS | exec PATH | kill 0]
// stdout: "truth child pid=P cpu_ns=C" per child, "truth children n=N
//         cpu_ns=SUM", "truth parent pid=P cpu_ns=C" (the parent's process
//         CPU at its end), "truth lingerer pid=P" / "truth execer pid=P".
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static long long clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline, noclone)) void burn(long long ns, clockid_t c) {
  long long end = clock_ns(c) + ns;
  unsigned long x = sink;
  while (clock_ns(c) < end)
    for (int i = 0; i < 500; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
  sink = x;
}

__attribute__((noinline, noclone)) void child_burn(long long ns) { burn(ns, CLOCK_PROCESS_CPUTIME_ID); }

__attribute__((noinline, noclone)) void child_alloc(int n) {
  for (int i = 0; i < n; i++) {
    char* p = malloc(64 << 10);
    if (!p) _exit(3);
    memset(p, i, 64 << 10);
    sink += (unsigned char)p[i];
    free(p);
  }
}

__attribute__((noinline, noclone)) void parent_work(void) { burn(50000000LL, CLOCK_THREAD_CPUTIME_ID); }

int main(int argc, char** argv) {
  if (argc != 4 && argc != 6) {
    fprintf(stderr, "usage: fork_many N BURN_US ALLOCS [linger MS | exec PATH | kill 0]\n");
    return 2;
  }
  int n = atoi(argv[1]), allocs = atoi(argv[3]);
  long long burn_ns = atoll(argv[2]) * 1000LL;
  const char* mode = argc == 6 ? argv[4] : "";
  int linger_ms = strcmp(mode, "linger") == 0 ? atoi(argv[5]) : 0;
  const char* exec_path = strcmp(mode, "exec") == 0 ? argv[5] : NULL;
  int fds[2];
  if (pipe(fds) != 0) return 1;
  for (int i = 0; i < n; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      close(fds[0]);
      const int lingers = linger_ms && i == n - 1;
      if (lingers) {
        // Outlives the parent: reported before the parent ends.
        char b[64];
        int len = snprintf(b, sizeof b, "L %d 0\n", (int)getpid());
        if (write(fds[1], b, len) != len) _exit(4);
        close(fds[1]);
        struct timespec ts = {linger_ms / 1000, (linger_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
      }
      child_burn(burn_ns);
      child_alloc(allocs);
      if (exec_path && i == n - 1) {
        char b[64];
        int len = snprintf(b, sizeof b, "E %d 0\n", (int)getpid());
        if (write(fds[1], b, len) != len) _exit(4);
        close(fds[1]);
        execl(exec_path, exec_path, "after", (char*)NULL);
        _exit(5);
      }
      if (!lingers) {
        char b[64];
        int len = snprintf(b, sizeof b, "C %d %lld\n", (int)getpid(), clock_ns(CLOCK_PROCESS_CPUTIME_ID));
        if (write(fds[1], b, len) != len) _exit(4);
      }
      exit(0);
    }
    if (!(linger_ms && i == n - 1)) waitpid(pid, NULL, 0);
  }
  close(fds[1]);
  FILE* in = fdopen(fds[0], "r");
  char kind;
  int pid, got = 0;
  long long cpu, sum = 0;
  while (in && fscanf(in, " %c %d %lld", &kind, &pid, &cpu) == 3) {
    if (kind == 'L') {
      printf("truth lingerer pid=%d\n", pid);
      continue;
    }
    if (kind == 'E') {
      printf("truth execer pid=%d\n", pid);
      continue;
    }
    printf("truth child pid=%d cpu_ns=%lld\n", pid, cpu);
    sum += cpu, got++;
  }
  printf("truth children n=%d cpu_ns=%lld\n", got, sum);
  if (strcmp(mode, "kill") == 0) {
    fflush(stdout);
    raise(SIGKILL);
  }
  parent_work();
  printf("truth parent pid=%d cpu_ns=%lld\n", (int)getpid(), clock_ns(CLOCK_PROCESS_CPUTIME_ID));
  return 0;
}
