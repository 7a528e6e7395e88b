// onstack_handlers: a program's SA_ONSTACK handlers on threads where it set
// no alternate stack, which the kernel runs on the thread's own stack; each
// mode prints what it saw, to compare with a plain run. Modes:
//   big    SA_ONSTACK|SA_SIGINFO handlers with a 256 KiB frame, touched end
//          to end: SIGUSR1 raised 300 times from main and from a second
//          thread while both compute, and a SIGSEGV (a null write) that the
//          handler leaves by siglongjmp, 20 times on each. Prints per thread
//          a checksum, whether sigaltstack said SS_DISABLE in every handler
//          and whether the handler's frame lay inside the thread's stack.
//   trace  an SA_ONSTACK SIGSEGV handler prints whether backtrace() finds
//          the faulting function right above the signal frame.
//   own    the program sets an alternate stack of its own: the SA_ONSTACK
//          handler runs there (its local inside it, SS_ONSTACK reported).
#define _GNU_SOURCE
#include <execinfo.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG (256 << 10)
#define RAISES 300
#define FAULTS 20
#define PASSES 64

struct seen {
  uintptr_t lo, hi;     // the thread's stack
  uint64_t sum;         // of what the handlers read back
  int handled, disabled, inside;
  sigjmp_buf jump;
};
static __thread struct seen* t_seen;

__attribute__((noinline)) void fault_here(volatile int* p) {
  *p = 1;
  __asm__ volatile("" ::: "memory");  // not a tail call: the fault is in this frame
}

static void note_stack(struct seen* s) {
  pthread_attr_t a;
  void* addr;
  size_t size;
  pthread_getattr_np(pthread_self(), &a);
  pthread_attr_getstack(&a, &addr, &size);
  pthread_attr_destroy(&a);
  s->lo = (uintptr_t)addr;
  s->hi = s->lo + size;
  t_seen = s;
}

// The frame: BIG bytes written from one end to the other and read back.
static void on_big(int sig, siginfo_t* si, void* uc) {
  volatile unsigned char buf[BIG];
  struct seen* s = t_seen;
  uint64_t sum = 0;
  for (int pass = 0; pass < PASSES; ++pass) {  // long enough for CPU samples to land in it
    for (size_t i = 0; i < BIG; i += 64) buf[i] = (unsigned char)((i >> 6) + pass) ^ (unsigned char)sig;
    for (size_t i = 0; i < BIG; i += 64) sum += buf[i];
  }
  stack_t ss;
  sigaltstack(NULL, &ss);
  uintptr_t lo = (uintptr_t)&buf[0], hi = (uintptr_t)&buf[BIG - 1];
  s->sum += sum;
  s->handled++;
  s->disabled += (ss.ss_flags & SS_DISABLE) != 0;
  s->inside += lo >= s->lo && hi < s->hi;
  if (sig == SIGSEGV) siglongjmp(s->jump, 1);
}

static uint64_t compute(uint64_t x, int n) {
  for (int i = 0; i < n; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

static char g_report[2][160];  // main's, the thread's: printed in that order

static void run_big(int who) {
  struct seen s;
  memset(&s, 0, sizeof s);
  note_stack(&s);
  uint64_t x = 1;
  for (int i = 0; i < RAISES; ++i) {
    x = compute(x, 300000);
    pthread_kill(pthread_self(), SIGUSR1);
  }
  for (int i = 0; i < FAULTS; ++i)
    if (sigsetjmp(s.jump, 1) == 0) fault_here(NULL);
  snprintf(g_report[who], sizeof g_report[who],
           "%s: handled %d, sum %llu, SS_DISABLE in %d, inside its stack %d, computed %llu\n",
           who ? "thread" : "main", s.handled, (unsigned long long)s.sum, s.disabled, s.inside,
           (unsigned long long)(x & 0xffff));
}

static void* second(void* arg) {
  run_big(1);
  return arg;
}

static void install(int sig, void (*fn)(int, siginfo_t*, void*)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = fn;
  sa.sa_flags = SA_ONSTACK | SA_SIGINFO;
  sigaction(sig, &sa, NULL);
}

static sigjmp_buf g_trace_jump;

static void on_trace(int sig, siginfo_t* si, void* uc) {
  void* frames[8];
  int n = backtrace(frames, 8);
  uintptr_t at = n > 2 ? (uintptr_t)frames[2] : 0, f = (uintptr_t)fault_here;
  printf("second frame in fault_here: %d\n", at >= f && at < f + 64);
  siglongjmp(g_trace_jump, 1);
}

static char g_own[256 << 10];
static volatile int g_own_inside, g_own_onstack;

static void on_own(int sig, siginfo_t* si, void* uc) {
  volatile char local = 0;
  stack_t ss;
  sigaltstack(NULL, &ss);
  g_own_inside = (char*)&local >= g_own && (char*)&local < g_own + sizeof g_own;
  g_own_onstack = (ss.ss_flags & SS_ONSTACK) != 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "big")) {
    install(SIGUSR1, on_big);
    install(SIGSEGV, on_big);
    pthread_t t;
    pthread_create(&t, NULL, second, NULL);
    run_big(0);
    pthread_join(t, NULL);
    printf("%s%s", g_report[0], g_report[1]);
    return 0;
  }
  if (!strcmp(mode, "trace")) {
    install(SIGSEGV, on_trace);
    if (sigsetjmp(g_trace_jump, 1) == 0) fault_here(NULL);
    printf("recovered\n");
    return 0;
  }
  if (!strcmp(mode, "own")) {
    stack_t ss = {g_own, 0, sizeof g_own};
    sigaltstack(&ss, NULL);
    install(SIGUSR1, on_own);
    raise(SIGUSR1);
    printf("handler on the program's alternate stack: %d, SS_ONSTACK: %d\n", g_own_inside, g_own_onstack);
    return 0;
  }
  fprintf(stderr, "usage: onstack_handlers big|trace|own\n");
  return 2;
}
