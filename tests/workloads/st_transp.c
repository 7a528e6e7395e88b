// st_transp: what a program sees of its signal dispositions, and what its own
// handlers do, so that runs with and without the shim can be compared.
// usage: st_transp MODE
//   query           prints sigaction(sig, NULL, &old) for SIGTERM, SIGHUP, SIGUSR2,
//                   SIGPROF and SIGRTMAX-4 at start; sets handlers / SIG_IGN /
//                   SIG_DFL and prints what sigaction and signal() report after
//                   each change. Lines "view ..." compare handler, flags (without
//                   SA_RESTORER, which libc adds itself) and mask; lines
//                   "restorer ..." show the SA_RESTORER bit. Then one-shot
//                   handlers (SA_RESETHAND, sysv_signal) on SIGUSR2 and
//                   SIGRTMAX-4, each delivered once. Exits 0.
//   handler_return  own SIGTERM handler (sigaction) sets a flag; prints "ready";
//                   busy in wait_work until the flag; returns 42.
//   handler_exit    own SIGTERM handler (signal()) calls _exit(43); prints "ready";
//                   busy in wait_work until it comes.
//   ignored         prints what SIGINT and SIGHUP are (inherited SIG_IGN), prints
//                   "ready", stays busy 1 s in wait_work (the parent sends SIGINT
//                   and SIGHUP meanwhile), raises both itself, prints "survived",
//                   returns 0.
//   sigprof         own SIGPROF handler and setitimer(ITIMER_PROF, 10 ms); burns
//                   1 s of CPU in prof_burn; prints "sigprof calls=N"; returns 0.
//   rtsig           own SA_SIGINFO handler on SIGRTMAX-4 (the shim's sampling
//                   signal); raises it 3 times; burns 0.5 s of CPU in rt_burn;
//                   prints "rtsig own=N foreign=M" (own: si_code SI_TKILL, the
//                   raises; foreign: anything else); returns 0.
//   reset_all       sets every signal to SIG_DFL (signal(i, SIG_DFL) for 1..NSIG-1, a
//                   daemon's idiom after fork), burns 0.5 s of CPU in rt_burn,
//                   prints "reset_all done", returns 0.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile sig_atomic_t got_term, prof_calls, rt_own, rt_foreign;

static void burn(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
}

static double clock_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Busy until *flag is set or `seconds` of wall time passed.
__attribute__((noinline, noclone)) void wait_work(volatile sig_atomic_t* flag, double seconds) {
  double end = clock_s(CLOCK_MONOTONIC) + seconds;
  while ((!flag || !*flag) && clock_s(CLOCK_MONOTONIC) < end) burn(200000UL);
}

__attribute__((noinline, noclone)) void prof_burn(double cpu_seconds) {
  double end = clock_s(CLOCK_THREAD_CPUTIME_ID) + cpu_seconds;
  while (clock_s(CLOCK_THREAD_CPUTIME_ID) < end) burn(200000UL);
}

__attribute__((noinline, noclone)) void rt_burn(double cpu_seconds) {
  double end = clock_s(CLOCK_THREAD_CPUTIME_ID) + cpu_seconds;
  while (clock_s(CLOCK_THREAD_CPUTIME_ID) < end) burn(200000UL);
}

static void on_term(int sig) { got_term = sig; }
static void on_term_exit(int sig) { _exit(43); }
static void on_usr2(int sig) {}
static void on_prof(int sig) { prof_calls++; }
static void on_rt(int sig, siginfo_t* si, void* uc) {
  if (si->si_code == SI_TKILL) rt_own++;
  else rt_foreign++;
}

static const char* kind(const struct sigaction* sa) {
  if (!(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL) return "default";
  if (!(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_IGN) return "ignore";
  if (sa->sa_handler == on_term) return "on_term";
  if (sa->sa_handler == on_usr2) return "on_usr2";
  if (sa->sa_handler == on_prof) return "on_prof";
  if ((sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_rt) return "on_rt";
  return "other-handler";
}

static void show(const char* when, const char* name, int sig) {
  struct sigaction old;
  memset(&old, 0x5a, sizeof old);  // what the call does not fill shows
  if (sigaction(sig, NULL, &old) != 0) {
    printf("view %s %s: sigaction failed\n", when, name);
    return;
  }
  printf("view %s %s: %s flags=%#x mask=", when, name, kind(&old),
         (unsigned)(old.sa_flags & ~0x04000000 /* SA_RESTORER */));
  int any = 0;
  for (int s = 1; s < 65; s++)
    if (sigismember(&old.sa_mask, s) == 1) printf("%s%d", any++ ? "," : "", s);
  printf("%s\n", any ? "" : "-");
  printf("restorer %s %s: SA_RESTORER=%d\n", when, name, (old.sa_flags & 0x04000000) != 0);
}

static void query(void) {
  int rt = SIGRTMAX - 4;
  show("start", "SIGTERM", SIGTERM);
  show("start", "SIGHUP", SIGHUP);
  show("start", "SIGUSR2", SIGUSR2);
  show("start", "SIGPROF", SIGPROF);
  show("start", "SIGRTMAX-4", rt);

  struct sigaction sa, prev;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sa.sa_flags = SA_RESTART | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGUSR1);
  sigaddset(&sa.sa_mask, SIGHUP);
  memset(&prev, 0x5a, sizeof prev);
  sigaction(SIGTERM, &sa, &prev);
  printf("set SIGTERM on_term: previous was %s\n", kind(&prev));
  show("after-set", "SIGTERM", SIGTERM);
  raise(SIGTERM);
  printf("raise SIGTERM: on_term ran=%s\n", got_term == SIGTERM ? "yes" : "no");

  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigaction(SIGTERM, &sa, &prev);
  printf("set SIGTERM SIG_DFL: previous was %s\n", kind(&prev));
  show("after-dfl", "SIGTERM", SIGTERM);

  signal(SIGHUP, SIG_IGN);
  show("after-ign", "SIGHUP", SIGHUP);
  raise(SIGHUP);
  printf("raise SIGHUP while ignored: survived\n");

  void (*p1)(int) = signal(SIGUSR2, on_usr2);
  void (*p2)(int) = signal(SIGUSR2, SIG_DFL);
  printf("signal(SIGUSR2, on_usr2) returned %s; signal(SIGUSR2, SIG_DFL) returned %s\n",
         p1 == SIG_DFL ? "SIG_DFL" : p1 == SIG_IGN ? "SIG_IGN" : "a handler",
         p2 == on_usr2 ? "on_usr2" : p2 == SIG_DFL ? "SIG_DFL" : "something else");
  show("after-signal", "SIGUSR2", SIGUSR2);

  // One-shot handlers: the kernel resets the handler alone at delivery and
  // keeps the flags; it keeps no flag it does not know (sysv_signal asks
  // for SA_INTERRUPT too). The same on the shim's own signal number.
  const int oneshot[] = {SIGUSR2, rt};
  const char* names[] = {"SIGUSR2", "SIGRTMAX-4"};
  for (int i = 0; i < 2; i++) {
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr2;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigaction(oneshot[i], &sa, NULL);
    raise(oneshot[i]);
    show("after-resethand-delivery", names[i], oneshot[i]);
    sysv_signal(oneshot[i], on_usr2);
    show("after-sysv_signal", names[i], oneshot[i]);
    raise(oneshot[i]);
    show("after-sysv-delivery", names[i], oneshot[i]);
    signal(oneshot[i], SIG_DFL);
  }
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "query";
  setvbuf(stdout, NULL, _IONBF, 0);
  if (!strcmp(mode, "query")) {
    query();
    return 0;
  }
  if (!strcmp(mode, "handler_return")) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    printf("ready pid=%d\n", (int)getpid());
    wait_work(&got_term, 30);
    printf("handled %s\n", got_term == SIGTERM ? "SIGTERM" : "nothing");
    return 42;
  }
  if (!strcmp(mode, "handler_exit")) {
    signal(SIGTERM, on_term_exit);
    printf("ready pid=%d\n", (int)getpid());
    wait_work(NULL, 30);
    printf("no SIGTERM came\n");
    return 1;
  }
  if (!strcmp(mode, "ignored")) {
    struct sigaction a, b;
    sigaction(SIGINT, NULL, &a);
    sigaction(SIGHUP, NULL, &b);
    printf("SIGINT %s, SIGHUP %s\n", kind(&a), kind(&b));
    printf("ready pid=%d\n", (int)getpid());
    wait_work(NULL, 1.0);
    raise(SIGINT);
    raise(SIGHUP);
    printf("survived\n");
    return 0;
  }
  if (!strcmp(mode, "sigprof")) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_prof;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval it = {{0, 10000}, {0, 10000}};
    setitimer(ITIMER_PROF, &it, NULL);
    prof_burn(1.0);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    printf("sigprof calls=%d\n", (int)prof_calls);
    return 0;
  }
  if (!strcmp(mode, "rtsig")) {
    int rt = SIGRTMAX - 4;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_rt;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(rt, &sa, NULL);
    for (int i = 0; i < 3; i++) raise(rt);
    rt_burn(0.5);
    printf("rtsig own=%d foreign=%d\n", (int)rt_own, (int)rt_foreign);
    return 0;
  }
  if (!strcmp(mode, "reset_all")) {
    for (int i = 1; i < NSIG; i++)
      if (i != SIGKILL && i != SIGSTOP) signal(i, SIG_DFL);
    rt_burn(0.5);
    printf("reset_all done\n");
    return 0;
  }
  fprintf(stderr, "st_transp: unknown mode %s\n", mode);
  return 2;
}
