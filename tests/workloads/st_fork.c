// st_fork: fork, vfork and posix_spawn children, and what they profile.
// usage: st_fork MODE
// Every parent mode: burns ~0.3 s in parent_burn, starts a child as MODE says,
// waits for it and prints "child pid=N status=exit:C|signal:S", then burns
// ~0.1 s more in parent_burn, holds 14 MiB at parent_hold and exits 0.
//   exit | _exit | term   fork; the child burns ~0.3 s in child_burn, holds 8 MiB at
//                         child_hold, prints "in-child pid=N", then exit(3) / _exit(4) /
//                         raise(SIGTERM).
//   forkfork              fork; the child burns in child_burn, forks a grandchild that
//                         burns ~0.3 s in grandchild_burn, holds 12 MiB at
//                         grandchild_hold and exits 4; the child prints
//                         "grandchild pid=N status=...", then exits 3.
//   fork_exec             fork; the child burns in child_burn, then execs
//                         "st_fork spawned".
//   vfork_exec            vfork; the child execs "st_fork spawned" (execv, environ).
//   vfork_noenv           vfork; the child execve()s "st_fork spawned" with an
//                         environment without LD_PRELOAD.
//   vfork_fail            vfork; the child execs a missing file, then _exit(7).
//   spawn | spawn_noenv   posix_spawn of "st_fork spawned" with environ / without
//                         LD_PRELOAD.
//   spawned               the spawned program: burns ~0.2 s in spawned_burn, holds
//                         10 MiB at spawned_hold, prints "spawned pid=N shim=yes|no",
//                         exits 6.
#define _GNU_SOURCE
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

static volatile unsigned long sink;
char* held;  // not static: the compiler must keep the allocations
char* held2;

static void burn(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
}

__attribute__((noinline, noclone)) void parent_burn(unsigned long n) { burn(n); }
__attribute__((noinline, noclone)) void child_burn(void) { burn(300000000UL); }
__attribute__((noinline, noclone)) void grandchild_burn(void) { burn(300000000UL); }
__attribute__((noinline, noclone)) void spawned_burn(void) { burn(200000000UL); }

static char* hold(size_t n) {
  char* p = malloc(n);
  memset(p, 1, n);
  return p;
}
__attribute__((noinline, noclone)) void parent_hold(void) { held2 = hold(14 << 20); }
__attribute__((noinline, noclone)) void child_hold(void) { held = hold(8 << 20); }
__attribute__((noinline, noclone)) void grandchild_hold(void) { held = hold(12 << 20); }
__attribute__((noinline, noclone)) void spawned_hold(void) { held = hold(10 << 20); }

static int shim_mapped(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, "libprofshim")) found = 1;
  if (f) fclose(f);
  return found;
}

static void report(const char* who, pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) {
    perror("waitpid");
    exit(1);
  }
  if (WIFEXITED(st)) printf("%s pid=%d status=exit:%d\n", who, (int)pid, WEXITSTATUS(st));
  else if (WIFSIGNALED(st)) printf("%s pid=%d status=signal:%d\n", who, (int)pid, WTERMSIG(st));
  else printf("%s pid=%d status=other:%d\n", who, (int)pid, st);
}

// environ without LD_PRELOAD
static char** no_preload_env(void) {
  size_t n = 0;
  while (environ[n]) n++;
  char** env = calloc(n + 1, sizeof(char*));
  size_t j = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0) env[j++] = environ[i];
  return env;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  const char* mode = argc > 1 ? argv[1] : "exit";
  if (!strcmp(mode, "spawned")) {
    spawned_burn();
    spawned_hold();
    printf("spawned pid=%d shim=%s\n", (int)getpid(), shim_mapped() ? "yes" : "no");
    return 6;
  }
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) { perror("readlink"); return 1; }
  self[len] = 0;
  char* sargs[] = {"st_fork", "spawned", NULL};
  char** noenv = no_preload_env();

  parent_burn(300000000UL);
  pid_t pid = -1;
  if (!strcmp(mode, "exit") || !strcmp(mode, "_exit") || !strcmp(mode, "term")) {
    pid = fork();
    if (pid == 0) {
      child_burn();
      child_hold();
      printf("in-child pid=%d\n", (int)getpid());
      if (!strcmp(mode, "exit")) exit(3);
      if (!strcmp(mode, "_exit")) _exit(4);
      raise(SIGTERM);
      _exit(99);
    }
  } else if (!strcmp(mode, "forkfork")) {
    pid = fork();
    if (pid == 0) {
      child_burn();
      pid_t g = fork();
      if (g == 0) {
        grandchild_burn();
        grandchild_hold();
        printf("in-grandchild pid=%d\n", (int)getpid());
        exit(4);
      }
      report("grandchild", g);
      printf("in-child pid=%d\n", (int)getpid());
      exit(3);
    }
  } else if (!strcmp(mode, "fork_exec")) {
    pid = fork();
    if (pid == 0) {
      child_burn();
      printf("in-child pid=%d\n", (int)getpid());
      execv(self, sargs);
      _exit(98);
    }
  } else if (!strcmp(mode, "vfork_exec")) {
    pid = vfork();
    if (pid == 0) {
      execv(self, sargs);
      _exit(98);
    }
  } else if (!strcmp(mode, "vfork_noenv")) {
    pid = vfork();
    if (pid == 0) {
      execve(self, sargs, noenv);
      _exit(98);
    }
  } else if (!strcmp(mode, "vfork_fail")) {
    pid = vfork();
    if (pid == 0) {
      execv("/nonexistent/st_fork", sargs);
      _exit(7);
    }
  } else if (!strcmp(mode, "spawn") || !strcmp(mode, "spawn_noenv")) {
    int rc = posix_spawn(&pid, self, NULL, NULL, sargs, !strcmp(mode, "spawn") ? environ : noenv);
    if (rc != 0) {
      fprintf(stderr, "posix_spawn: %s\n", strerror(rc));
      return 1;
    }
  } else {
    fprintf(stderr, "st_fork: unknown mode %s\n", mode);
    return 2;
  }
  if (pid < 0) {
    perror("fork");
    return 1;
  }
  report("child", pid);
  parent_burn(100000000UL);
  parent_hold();
  return 0;
}
