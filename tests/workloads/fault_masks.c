// fault_masks: a program's own handlers for the fault signals, as the kernel
// delivers to them; each mode prints what it saw, to compare with a plain
// run. Modes:
//   raise  a SIGSEGV handler, SIGSEGV blocked, raise(SIGSEGV): prints
//          whether the handler ran and whether SIGSEGV is pending.
//   jump   a SIGSEGV handler that siglongjmps, every signal blocked, a null
//          write: the kernel forces the default (death by SIGSEGV).
//   trace  an SA_RESETHAND SIGSEGV handler prints backtrace_symbols of the
//          three frames above it (module and offset, stable run to run) and
//          whether the second is in fault_here, where the write faults;
//          then _exit(3).
#include <execinfo.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sigjmp_buf g_jump;
static volatile sig_atomic_t g_ran;

static void on_jump(int sig) { siglongjmp(g_jump, 1); }
static void on_note(int sig) { g_ran = 1; }

__attribute__((noinline)) void fault_here(volatile int* p) {
  *p = 1;
  __asm__ volatile("" ::: "memory");  // not a tail call: the fault is in this frame
}

static void on_trace(int sig) {
  void* frames[8];
  int n = backtrace(frames, 8);
  char** names = backtrace_symbols(frames, n);
  for (int i = 1; i < n && i < 4; ++i) {
    const char* base = strrchr(names[i], '/');
    base = base ? base + 1 : names[i];
    printf("frame %d: %.*s\n", i, (int)strcspn(base, "["), base);
  }
  uintptr_t at = n > 2 ? (uintptr_t)frames[2] : 0, f = (uintptr_t)fault_here;
  printf("second frame in fault_here: %d\n", at >= f && at < f + 64);
  fflush(stdout);
  _exit(3);
}

static void install(void (*fn)(int), int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sa.sa_flags = flags;
  sigaction(SIGSEGV, &sa, NULL);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "raise")) {
    install(on_note, 0);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGSEGV);
    sigprocmask(SIG_BLOCK, &s, NULL);
    raise(SIGSEGV);
    sigpending(&s);
    printf("handler ran: %d, pending: %d\n", (int)g_ran, sigismember(&s, SIGSEGV));
    return 0;
  }
  if (!strcmp(mode, "jump")) {
    install(on_jump, 0);
    if (sigsetjmp(g_jump, 1) == 0) {
      sigset_t all;
      sigfillset(&all);
      sigprocmask(SIG_BLOCK, &all, NULL);
      printf("faulting\n");
      fflush(stdout);
      fault_here(NULL);
    }
    printf("recovered\n");
    return 0;
  }
  if (!strcmp(mode, "trace")) {
    install(on_trace, SA_RESETHAND);
    fault_here(NULL);
    return 0;
  }
  fprintf(stderr, "usage: fault_masks raise|jump|trace\n");
  return 2;
}
