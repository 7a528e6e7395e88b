// sig_habits: how real programs use signals and threads, one habit a mode,
// each printing what it saw so a run under the shim can be compared line for
// line with a plain run. Modes:
//   lzma          main blocks every signal around pthread_create (liblzma's
//                 habit): 2 workers inherit a full mask and burn 0.4 s each;
//                 each prints whether its mask query shows SIGRTMAX-4.
//   sigthread     main blocks everything, starts a signal thread looping on
//                 sigwaitinfo(full set) and 2 workers burning 0.4 s; main
//                 sends SIGUSR1 at the end: the signal thread prints what it got.
//   attrmask      2 workers started with pthread_attr_setsigmask_np(full set).
//   later         2 workers block everything themselves, then burn.
//   sigwait_alarm every signal blocked; alarm(1); sigwait on the full set:
//                 prints the signal number it got.
//   siginterrupt  siginterrupt(SIGALRM, 1), then twice: signal(SIGALRM, h),
//                 alarm(1) and a read of an empty pipe: prints each result.
//   views         sysv_signal, sigset, an SA_RESETHAND handler's delivery,
//                 signal(): prints sigaction's view after each.
//   forksig       one thread loops signal(SIGUSR1, h) while another forks 40
//                 children that call signal(SIGUSR1, SIG_DFL) and _exit(0).
//   altstack [S]  an 8 KiB sigaltstack (a guard page below); a SIGALRM handler (SA_ONSTACK) with a
//                 3 KiB buffer burns ~0.3 ms per call under a 1 ms ITIMER_REAL
//                 for S seconds (default 1).
//   crash_commits [alloc]  a worker "commits" (writes a line) every ms
//                 (sleeping between, or with "alloc" inside malloc and free);
//                 main writes "crash" and faults: prints nothing after.
//   unshare       unshare(CLONE_NEWUSER) and the Threads: count at main.
//   tidreuse N    N threads one after another, then a thread named "worker"
//                 burns 0.3 s.
//   termblock     a worker allocates and frees in a loop; main sends it
//                 SIGTERM (pthread_kill), then the worker blocks every signal
//                 and waits (pause; "sigwait": sigwait on the full set,
//                 printing what it got; "sigsuspend" or "ppoll": with the full
//                 set as the call's mask), as a pool's thread does as it
//                 starts: without the shim the process is gone at the SIGTERM.
//   resethand     node's exit on SIGTERM: a handler installed with
//                 SA_RESETHAND prints "handler" and raises the signal again;
//                 main burns 0.2 s and raises SIGTERM.
//   termexit      main allocates in a loop; a second thread sends it SIGTERM
//                 (pthread_kill), main then blocks SIGTERM, and the second
//                 thread calls exit(0) 0.3 ms later: without the shim the
//                 process is gone at the SIGTERM.
//   suspend       prints "ready", then sigsuspend(empty set) until a signal
//                 ends it (the classic wait for SIGTERM).
//   pending       SIGINT sent to itself while blocked, its disposition set
//                 to SIG_DFL, then unblocked (coreutils timeout's way to die
//                 of the signal it got): dies there; it prints a line before
//                 the unblock and one after, which without the shim never
//                 comes; a second SIGINT follows.
// Threads that burn print "truth thread name=NAME tid=T cpu_ns=C".
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static long long cpu_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline, noclone)) void habit_burn(double seconds) {
  long long end = cpu_ns(CLOCK_THREAD_CPUTIME_ID) + (long long)(seconds * 1e9);
  unsigned long x = sink;
  while (cpu_ns(CLOCK_THREAD_CPUTIME_ID) < end)
    for (int i = 0; i < 20000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
  sink = x;
}

static void truth(const char* name) {
  pthread_mutex_lock(&out_lock);
  printf("truth thread name=%s tid=%ld cpu_ns=%lld\n", name, (long)syscall(SYS_gettid),
         cpu_ns(CLOCK_THREAD_CPUTIME_ID));
  fflush(stdout);
  pthread_mutex_unlock(&out_lock);
}

static int shows_rt(void) {
  sigset_t cur;
  sigemptyset(&cur);
  pthread_sigmask(SIG_BLOCK, NULL, &cur);
  return sigismember(&cur, SIGRTMAX - 4);
}

static void* worker(void* arg) {
  const char* name = arg;
  if (!strncmp(name, "later", 5)) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
  }
  pthread_setname_np(pthread_self(), name);
  habit_burn(0.4);
  pthread_mutex_lock(&out_lock);
  printf("%s: mask shows SIGRTMAX-4: %d\n", name, shows_rt());
  pthread_mutex_unlock(&out_lock);
  truth(name);
  return NULL;
}

static void two_workers(const char* a, const char* b, const pthread_attr_t* attr) {
  pthread_t t[2];
  pthread_create(&t[0], attr, worker, (void*)a);
  pthread_create(&t[1], attr, worker, (void*)b);
  pthread_join(t[0], NULL);
  pthread_join(t[1], NULL);
}

static void* signal_thread(void* arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  for (;;) {
    siginfo_t si;
    int s = sigwaitinfo(&all, &si);
    if (s < 0 && errno == EINTR) continue;
    printf("signal thread got %d code %d\n", s, s > 0 ? si.si_code : 0);
    return NULL;
  }
}

static volatile sig_atomic_t alarms, usr1;
static void on_alarm(int s) { (void)s; alarms++; }
static void on_usr1(int s) { (void)s; usr1++; }
// Uses 3 KiB of the 8 KiB alternate stack itself, as a handler with a
// buffer on its stack does: what is left is all a signal nested in it gets.
static void on_onstack_alarm(int s) {
  (void)s;
  volatile char buf[3072];
  for (size_t i = 0; i < sizeof buf; i += 64) buf[i] = (char)i;
  long long end = cpu_ns(CLOCK_THREAD_CPUTIME_ID) + 300000;
  while (cpu_ns(CLOCK_THREAD_CPUTIME_ID) < end) sink += buf[(sink & 47) * 64];
  alarms++;
}

static void show_view(const char* what, int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigaction(sig, NULL, &sa);
  const char* h = sa.sa_handler == SIG_DFL ? "default" : sa.sa_handler == SIG_IGN ? "ignore" : "handler";
  printf("view %s: %s flags=%#x mask_has_sig=%d\n", what, h, sa.sa_flags & ~0x04000000, sigismember(&sa.sa_mask, sig));
}

static volatile int stop_looping;
static void* signal_looper(void* arg) {
  (void)arg;
  while (!stop_looping) signal(SIGUSR1, on_usr1);
  return NULL;
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void* committer(void* arg) {
  int allocates = arg != NULL;
  for (int i = 0;; i++) {
    char line[32];
    int n = snprintf(line, sizeof line, "commit %d\n", i);
    if (write(1, line, n) < 0) _exit(97);
    if (allocates) {
      // ~1 ms between commits, most of it inside malloc and free.
      long long t0 = now_ns();
      while (now_ns() - t0 < 1000000)
        for (int k = 0; k < 64; k++) free(malloc(64 + (size_t)k * 48));
    } else {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

static void* nothing(void* arg) { return arg; }

static void reraise(int sig) {
  printf("handler\n");
  raise(sig);
}

static volatile int termexit_started, termexit_sent;
static pthread_t termexit_main;

static void* termexit_sender(void* arg) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &s, NULL);
  while (!termexit_started) {
  }
  usleep(100000);
  pthread_kill(termexit_main, SIGTERM);
  termexit_sent = 1;
  usleep(300);
  exit(0);
  return arg;
}

static volatile int term_sent;
static const char* term_wait = "pause";

// Most of its time inside malloc and free, where the shim defers a fatal
// signal and retries it a moment later.
static void* term_blocker(void* arg) {
  void* slots[64] = {0};
  unsigned long r = 88172645463325252UL;
  while (!term_sent) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    int i = (int)(r % 64);
    free(slots[i]);
    slots[i] = malloc(16 + r % 4096);
  }
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  for (int sig = 0;;) {
    if (!strcmp(term_wait, "sigwait")) {
      if (sigwait(&all, &sig) == 0) printf("sigwait got %d\n", sig);
    } else if (!strcmp(term_wait, "sigsuspend")) {
      sigsuspend(&all);
    } else if (!strcmp(term_wait, "ppoll")) {
      ppoll(NULL, 0, NULL, &all);
    } else {
      pause();
    }
  }
  return arg;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  setvbuf(stdout, NULL, _IOLBF, 0);
  sigset_t all, old;
  sigfillset(&all);
  if (!strcmp(mode, "lzma")) {
    pthread_sigmask(SIG_SETMASK, &all, &old);
    two_workers("lzma-0", "lzma-1", NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  } else if (!strcmp(mode, "sigthread")) {
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    pthread_t st;
    pthread_create(&st, NULL, signal_thread, NULL);
    two_workers("sigthr-0", "sigthr-1", NULL);
    kill(getpid(), SIGUSR1);
    pthread_join(st, NULL);
  } else if (!strcmp(mode, "attrmask")) {
#if __GLIBC_PREREQ(2, 32)
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setsigmask_np(&attr, &all);
    two_workers("attr-0", "attr-1", &attr);
#else
    printf("no pthread_attr_setsigmask_np before glibc 2.32\n");
#endif
  } else if (!strcmp(mode, "later")) {
    two_workers("later-0", "later-1", NULL);
  } else if (!strcmp(mode, "sigwait_alarm")) {
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    alarm(1);
    habit_burn(0.3);
    int s = 0;
    sigwait(&all, &s);
    printf("sigwait got %d\n", s);
  } else if (!strcmp(mode, "siginterrupt")) {
    siginterrupt(SIGALRM, 1);
    int p[2];
    if (pipe(p) != 0) return 3;
    for (int i = 0; i < 2; i++) {
      char c;
      signal(SIGALRM, on_alarm);  // (re)armed, SysV style: siginterrupt still holds
      alarm(1);
      ssize_t r = read(p[0], &c, 1);
      printf("read %d: %zd %s\n", i, r, r < 0 ? strerror(errno) : "");
    }
  } else if (!strcmp(mode, "views")) {
    show_view("start SIGUSR1", SIGUSR1);
    sysv_signal(SIGUSR1, on_usr1);
    show_view("after sysv_signal", SIGUSR1);
    raise(SIGUSR1);
    show_view("after a one-shot delivery", SIGUSR1);
    sigset(SIGUSR2, on_usr1);
    show_view("after sigset", SIGUSR2);
    sigset(SIGUSR2, SIG_HOLD);
    sigprocmask(SIG_BLOCK, NULL, &old);
    printf("SIGUSR2 held: %d\n", sigismember(&old, SIGUSR2));
    sigset(SIGUSR2, SIG_DFL);
    show_view("after sigset SIG_DFL", SIGUSR2);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGHUP, &sa, NULL);
    show_view("SA_RESETHAND SIGHUP", SIGHUP);
    raise(SIGHUP);
    show_view("after its delivery", SIGHUP);
    signal(SIGTERM, on_usr1);
    show_view("signal SIGTERM", SIGTERM);
    signal(SIGTERM, SIG_DFL);
    show_view("signal SIGTERM SIG_DFL", SIGTERM);
    sigignore(SIGTERM);
    show_view("sigignore SIGTERM", SIGTERM);
    printf("usr1 handler ran %d times\n", (int)usr1);
  } else if (!strcmp(mode, "forksig")) {
    pthread_t t;
    pthread_create(&t, NULL, signal_looper, NULL);
    int ok = 0;
    for (int i = 0; i < 40; i++) {
      pid_t c = fork();
      if (c == 0) {
        signal(SIGUSR1, SIG_DFL);
        _exit(0);
      }
      int st;
      if (c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
    }
    stop_looping = 1;
    pthread_join(t, NULL);
    printf("children ok: %d\n", ok);
  } else if (!strcmp(mode, "altstack")) {
    // A guard page below it: a handler that overflows it faults there
    // rather than write over the heap unseen.
    char* m = mmap(NULL, 4096 + 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(m, 4096, PROT_NONE);
    stack_t ss = {m + 4096, 0, 8192};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_onstack_alarm;
    sa.sa_flags = SA_ONSTACK | SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    habit_burn(argc > 2 ? atof(argv[2]) : 1.0);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("altstack ok: %d\n", alarms > 10);
  } else if (!strcmp(mode, "crash_commits")) {
    pthread_t t;
    pthread_create(&t, NULL, committer, argc > 2 && !strcmp(argv[2], "alloc") ? "alloc" : NULL);
    struct timespec ts = {0, 30000000};
    nanosleep(&ts, NULL);
    if (write(1, "crash\n", 6) < 0) return 3;
    *(volatile int*)0 = 1;
  } else if (!strcmp(mode, "unshare")) {
    char buf[4096];
    FILE* f = fopen("/proc/self/status", "r");
    while (f && fgets(buf, sizeof buf, f))
      if (!strncmp(buf, "Threads:", 8)) printf("%s", buf);
    if (f) fclose(f);
    int r = unshare(CLONE_NEWUSER);
    printf("unshare(CLONE_NEWUSER): %d %s\n", r, r ? strerror(errno) : "");
  } else if (!strcmp(mode, "tidreuse")) {
    int n = argc > 2 ? atoi(argv[2]) : 33000;
    for (int i = 0; i < n; i++) {
      pthread_t t;
      if (pthread_create(&t, NULL, nothing, NULL) == 0) pthread_join(t, NULL);
    }
    pthread_t t;
    pthread_create(&t, NULL, worker, "worker");
    pthread_join(t, NULL);
  } else if (!strcmp(mode, "termblock")) {
    if (argc > 2) term_wait = argv[2];
    pthread_t t;
    pthread_create(&t, NULL, term_blocker, NULL);
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    pthread_kill(t, SIGTERM);
    term_sent = 1;
    for (;;) pause();
  } else if (!strcmp(mode, "pending")) {
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGINT);
    sigprocmask(SIG_BLOCK, &one, NULL);
    kill(getpid(), SIGINT);
    signal(SIGINT, SIG_DFL);
    printf("before the unblock\n");
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    printf("after the unblock\n");
    kill(getpid(), SIGINT);
    for (;;) pause();
  } else if (!strcmp(mode, "resethand")) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = reraise;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGTERM, &sa, NULL);
    habit_burn(0.2);
    raise(SIGTERM);
    printf("not reached\n");
  } else if (!strcmp(mode, "termexit")) {
    termexit_main = pthread_self();
    pthread_t t;
    pthread_create(&t, NULL, termexit_sender, NULL);
    void* v[64] = {0};
    int blocked = 0;
    for (unsigned long i = 0;; i++) {
      termexit_started = 1;
      if (termexit_sent && !blocked) {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGTERM);
        sigprocmask(SIG_BLOCK, &s, NULL);
        blocked = 1;
      }
      int k = (int)(i % 64);
      free(v[k]);
      v[k] = malloc(16 + (i * 7919) % 4000);
    }
  } else if (!strcmp(mode, "suspend")) {
    sigset_t none;
    sigemptyset(&none);
    printf("ready\n");
    for (;;) sigsuspend(&none);
  } else {
    fprintf(stderr, "sig_habits: unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}
