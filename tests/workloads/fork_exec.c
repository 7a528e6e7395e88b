// fork_exec: process images for the fork and exec stop paths.
// usage: fork_exec fork   the parent burns CPU in parent_work, forks; the
//                         child burns CPU in child_work, holds 8 MiB at
//                         child_hold and exits 0; the parent waits, exits 0.
//        fork_exec exec   burns CPU in before_exec, holds 8 MiB at
//                         hold_before_exec, then execs itself as "after".
//        fork_exec after  burns CPU in after_exec, holds 4 MiB at
//                         hold_after_exec, exits 0.
// stdout: "pid=N" lines naming which image ran with which pid.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile unsigned long sink;
char* held_parent;  // not static: the compiler must keep the allocations
char* held_child;

static void burn(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
}

__attribute__((noinline, noclone)) void parent_work(void) { burn(300000000UL); }
__attribute__((noinline, noclone)) void child_work(void) { burn(300000000UL); }
__attribute__((noinline, noclone)) void before_exec(void) { burn(300000000UL); }
__attribute__((noinline, noclone)) void after_exec(void) { burn(300000000UL); }

__attribute__((noinline, noclone)) void child_hold(void) {
  held_child = malloc(8 << 20);
  memset(held_child, 1, 8 << 20);
}
__attribute__((noinline, noclone)) void hold_before_exec(void) {
  held_parent = malloc(8 << 20);
  memset(held_parent, 1, 8 << 20);
}
__attribute__((noinline, noclone)) void hold_after_exec(void) {
  held_parent = malloc(4 << 20);
  memset(held_parent, 1, 4 << 20);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "fork";
  if (!strcmp(mode, "fork")) {
    parent_work();
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
      child_work();
      child_hold();
      printf("child pid=%d\n", (int)getpid());
      fflush(stdout);
      exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("parent pid=%d child status=%d\n", (int)getpid(), status);
    return 0;
  }
  if (!strcmp(mode, "exec")) {
    before_exec();
    hold_before_exec();
    printf("before-exec pid=%d\n", (int)getpid());
    fflush(stdout);
    char* args[] = {argv[0], "after", NULL};
    execv("/proc/self/exe", args);
    perror("execv");
    return 1;
  }
  after_exec();
  hold_after_exec();
  printf("after-exec pid=%d\n", (int)getpid());
  return 0;
}
