// runner: starts one measured run for tests/bench/bench.py and reports what
// wait4() says about it.
//
// Why not fork from Python: ru_maxrss is the high-water RSS of the process's
// signal struct, and execve() folds the *pre-exec* image's high-water mark
// into it (fs/exec.c, exec_mmap: setmax_mm_hiwater_rss). A child forked (or
// vforked) from the Python harness so carries the harness's ~80 MiB peak into
// every measurement. This runner is tiny: the program it forks and execs
// starts from the runner's ~1 MiB.
//
// usage: runner REPORT_FD N VAR=VALUE... (N of them) PROGRAM [ARGS...]
//   Runs PROGRAM (a path: no PATH search) with exactly the N VAR=VALUE
//   strings as its environment — the runner itself runs with the harness's
//   plain environment, so an LD_PRELOAD meant for the program is not loaded
//   into the runner — and with the runner's stdio. REPORT_FD (closed in the
//   program) gets one line after the program ends:
//   "status S t0 T0 t1 T1 utime U stime S maxrss_kib M"
//   S: the raw wait status; T0: CLOCK_MONOTONIC just before fork; T1:
//   CLOCK_MONOTONIC right after wait4 returns; U, S in microseconds, from the
//   rusage wait4 returns (the program's own plus all the descendants it waited
//   for). Exit status 0 when the report was written, 127 when the exec failed.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: runner REPORT_FD N VAR=VALUE... PROGRAM [ARGS...]\n");
    return 2;
  }
  int report = atoi(argv[1]);
  int nenv = atoi(argv[2]);
  if (nenv < 0 || 3 + nenv >= argc) {
    fprintf(stderr, "runner: bad environment count %d\n", nenv);
    return 2;
  }
  char** envp = calloc((size_t)nenv + 1, sizeof(char*));
  if (!envp) return 2;
  for (int i = 0; i < nenv; i++) envp[i] = argv[3 + i];
  char** prog = argv + 3 + nenv;
  if (fcntl(report, F_SETFD, FD_CLOEXEC) != 0) {
    perror("runner: report fd");
    return 2;
  }
  double t0 = now();
  pid_t pid = fork();
  if (pid < 0) {
    perror("runner: fork");
    return 2;
  }
  if (pid == 0) {
    execve(prog[0], prog, envp);
    fprintf(stderr, "runner: exec %s: %s\n", prog[0], strerror(errno));
    _exit(127);
  }
  // The harness kills our process group on a timeout; the program is in it.
  int status = 0;
  struct rusage ru;
  pid_t w;
  do {
    w = wait4(pid, &status, 0, &ru);
  } while (w < 0 && errno == EINTR);
  double t1 = now();
  if (w < 0) {
    perror("runner: wait4");
    return 2;
  }
  char line[256];
  int n = snprintf(line, sizeof line, "status %d t0 %.9f t1 %.9f utime %ld stime %ld maxrss_kib %ld\n", status,
                   t0, t1, (long)ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec,
                   (long)ru.ru_stime.tv_sec * 1000000L + ru.ru_stime.tv_usec, ru.ru_maxrss);
  if (write(report, line, (size_t)n) != n) return 2;
  return 0;
}
