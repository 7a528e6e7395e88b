// held_burn: a thread whose samples are held for a while. f burns 0.5 s of
// CPU; held blocks every signal with the raw system call (as Go's runtime
// masks signals: no libc wrapper for the shim to filter), burns 0.5 s and
// unblocks; g burns 0.1 s.
// stdout: "truth NAME cpu_ns=C" for f, held and g.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static long long thread_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long burn(long long ns) {
  long long t0 = thread_ns(), end = t0 + ns;
  unsigned long x = sink;
  while (thread_ns() < end)
    for (int i = 0; i < 2000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
  sink = x;
  return thread_ns() - t0;
}

__attribute__((noinline, noclone)) long long f(void) { return burn(500000000LL); }
__attribute__((noinline, noclone)) long long g(void) { return burn(100000000LL); }

__attribute__((noinline, noclone)) long long held(void) {
  unsigned long all = ~0UL, old = 0;
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, sizeof all);
  long long t = burn(500000000LL);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
  return t;
}

int main(void) {
  long long a = f(), b = held(), c = g();
  printf("truth f cpu_ns=%lld\ntruth held cpu_ns=%lld\ntruth g cpu_ns=%lld\n", a, b, c);
  return 0;
}
