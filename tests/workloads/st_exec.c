// st_exec: the exec family, process images before and after.
// usage: st_exec MODE [ARG]
//   after            the new image: burns ~0.2 s in after_exec_burn, holds 12 MiB at
//                    after_exec_hold, prints "after pid=N preload=yes|no shim=yes|no"
//                    (LD_PRELOAD in its environment; libprofshim mapped), exits 5.
//   execve execv execvp execvpe execl execlp execle fexecve
//                    burns ~0.2 s in before_exec_burn, holds 8 MiB at before_exec_hold,
//                    prints "before pid=N", then runs "st_exec after" through that
//                    function (the *p ones by the name "st_exec", searched in PATH;
//                    fexecve on an fd of /proc/self/exe). If it returns: prints
//                    "exec failed: ERRNO", exits 1.
//   noenv            as execve, but the new environment is PATH and PROFILE_DIR only
//                    (no LD_PRELOAD).
//   enoexec PATH     before_exec_burn, then execve(PATH) of a file that is executable
//                    but not a program (ENOEXEC), or
//   e2big            execve of itself with a 200 KiB argument (E2BIG): either way,
//                    prints "exec failed: ENOEXEC|E2BIG", burns ~0.3 s in
//                    after_failed_burn, holds 10 MiB at after_failed_hold, exits 0.
//   atexit_enoexec PATH
//                    before_exec_burn, then returns from main; an atexit
//                    handler execs PATH (ENOEXEC: the exec fails after the
//                    final stop), prints "exec failed: ENOEXEC".
//   chain N          burns ~0.1 s in chain_burn, prints "chain N pid=P", execs
//                    "st_exec chain N-1"; "chain 0" execs "st_exec after".
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char** environ;

static volatile unsigned long sink;
char* held;  // not static: the compiler must keep the allocation

static void burn(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
}

__attribute__((noinline, noclone)) void before_exec_burn(void) { burn(200000000UL); }
__attribute__((noinline, noclone)) void after_exec_burn(void) { burn(200000000UL); }
__attribute__((noinline, noclone)) void after_failed_burn(void) { burn(300000000UL); }
__attribute__((noinline, noclone)) void chain_burn(void) { burn(100000000UL); }

static void hold(size_t n) {
  held = malloc(n);
  memset(held, 1, n);
}
__attribute__((noinline, noclone)) void before_exec_hold(void) { hold(8 << 20); }
__attribute__((noinline, noclone)) void after_exec_hold(void) { hold(12 << 20); }
__attribute__((noinline, noclone)) void after_failed_hold(void) { hold(10 << 20); }

static const char* errname(int e) {
  switch (e) {
    case ENOEXEC: return "ENOEXEC";
    case E2BIG: return "E2BIG";
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    default: return strerror(e);
  }
}

static int shim_mapped(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, "libprofshim")) found = 1;
  if (f) fclose(f);
  return found;
}

static int after(void) {
  after_exec_burn();
  after_exec_hold();
  printf("after pid=%d preload=%s shim=%s\n", (int)getpid(), getenv("LD_PRELOAD") ? "yes" : "no",
         shim_mapped() ? "yes" : "no");
  return 5;
}

static void failed_then_go_on(int e) {
  printf("exec failed: %s\n", errname(e));
  fflush(stdout);
  after_failed_burn();
  after_failed_hold();
  exit(0);
}

static const char* g_late_path;
static void late_exec(void) {
  char* late_args[] = {"late", NULL};
  execv(g_late_path, late_args);
  printf("exec failed: %s\n", errname(errno));
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  const char* mode = argc > 1 ? argv[1] : "after";
  if (!strcmp(mode, "after")) return after();
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) { perror("readlink"); return 1; }
  self[n] = 0;
  char* args[] = {"st_exec", "after", NULL};

  if (!strcmp(mode, "chain")) {
    int k = argc > 2 ? atoi(argv[2]) : 0;
    chain_burn();
    printf("chain %d pid=%d\n", k, (int)getpid());
    char next[16];
    snprintf(next, sizeof next, "%d", k - 1);
    char* cargs[] = {"st_exec", "chain", next, NULL};
    execv(self, k > 0 ? cargs : args);
    printf("exec failed: %s\n", errname(errno));
    return 1;
  }

  before_exec_burn();
  before_exec_hold();
  printf("before pid=%d\n", (int)getpid());
  if (!strcmp(mode, "atexit_enoexec") && argc > 2) {
    g_late_path = argv[2];
    atexit(late_exec);
    return 0;
  }
  if (!strcmp(mode, "execve")) execve(self, args, environ);
  else if (!strcmp(mode, "execv")) execv(self, args);
  else if (!strcmp(mode, "execvp")) execvp("st_exec", args);
  else if (!strcmp(mode, "execvpe")) execvpe("st_exec", args, environ);
  else if (!strcmp(mode, "execl")) execl(self, "st_exec", "after", (char*)NULL);
  else if (!strcmp(mode, "execlp")) execlp("st_exec", "st_exec", "after", (char*)NULL);
  else if (!strcmp(mode, "execle")) execle(self, "st_exec", "after", (char*)NULL, environ);
  else if (!strcmp(mode, "fexecve")) {
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) { perror("open"); return 1; }
    fexecve(fd, args, environ);
  } else if (!strcmp(mode, "noenv")) {
    char path[4096], dir[4096];
    snprintf(path, sizeof path, "PATH=%s", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    snprintf(dir, sizeof dir, "PROFILE_DIR=%s", getenv("PROFILE_DIR") ? getenv("PROFILE_DIR") : "");
    char* env[] = {path, dir, NULL};
    execve(self, args, env);
  } else if (!strcmp(mode, "enoexec")) {
    execve(argc > 2 ? argv[2] : "./garbage", args, environ);
    failed_then_go_on(errno);
  } else if (!strcmp(mode, "e2big")) {
    size_t big = 200 << 10;  // one string longer than MAX_ARG_STRLEN (128 KiB)
    char* s = malloc(big + 1);
    memset(s, 'x', big);
    s[big] = 0;
    char* bargs[] = {"st_exec", "after", s, NULL};
    execve(self, bargs, environ);
    int e = errno;
    free(s);
    failed_then_go_on(e);
  } else {
    fprintf(stderr, "st_exec: unknown mode %s\n", mode);
    return 2;
  }
  printf("exec failed: %s\n", errname(errno));
  return 1;
}
