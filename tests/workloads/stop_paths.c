// stop_paths: does a little CPU work (spin, ~0.3 s) and holds 16 MiB at
// hold_at_stop, then stops the way argv[1] says:
//   return exit _exit _Exit quick_exit  -> status 0 (atexit handlers print)
//   exit_group -> syscall(SYS_exit_group, 0): the kernel's call, no libc exit
//   sigterm sigint sigusr1 -> raise() of that signal, default action (if the
//                            signal is ignored: goes on and returns 0)
//   abort -> abort()    segv -> a write through a null pointer
// stdout: "stop_paths: MODE" (printed with write(2), so it is never lost).
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HELD (16UL << 20)

static volatile unsigned long sink;
char* held;  // not static: the compiler must keep the allocation
static int* volatile null_ptr;

__attribute__((noinline, noclone)) void spin(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
}

__attribute__((noinline, noclone)) void hold_at_stop(void) {
  held = malloc(HELD);
  memset(held, 1, HELD);
}

static void say(const char* s) {
  if (write(1, s, strlen(s)) < 0) _exit(99);
}

static void on_exit_handler(void) { say("stop_paths: atexit handler ran\n"); }

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "return";
  atexit(on_exit_handler);
  at_quick_exit(on_exit_handler);
  spin(300000000UL);
  hold_at_stop();
  say("stop_paths: ");
  say(mode);
  say("\n");
  if (!strcmp(mode, "exit")) exit(0);
  if (!strcmp(mode, "_exit")) _exit(0);
  if (!strcmp(mode, "_Exit")) _Exit(0);
  if (!strcmp(mode, "quick_exit")) quick_exit(0);
  if (!strcmp(mode, "exit_group")) syscall(SYS_exit_group, 0);
  int sig = !strcmp(mode, "sigterm") ? SIGTERM
            : !strcmp(mode, "sigint")  ? SIGINT
            : !strcmp(mode, "sigusr1") ? SIGUSR1
                                       : 0;
  if (sig) {
    raise(sig);
    say("stop_paths: survived the signal (ignored)\n");
    return 0;
  }
  if (!strcmp(mode, "abort")) abort();
  if (!strcmp(mode, "segv")) *null_ptr = 1;
  if (strcmp(mode, "return") != 0) {
    say("stop_paths: unknown mode\n");
    return 2;
  }
  return 0;
}
