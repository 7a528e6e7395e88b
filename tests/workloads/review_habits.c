// review_habits: the programs a review of the signal and stop redesign
// broke the shim with, one mode each, to compare runs with and without it.
//   lostterm        main blocks SIGTERM and sends it while short-lived workers
//                   allocate: a worker takes it, often inside malloc, and
//                   ends soon after; the process must die of SIGTERM.
//   blocked_fault   a worker that blocks every signal faults (SIGSEGV).
//   smallstack N    two threads with 16 KiB stacks, N bytes in use, burn CPU.
//   defaultattr     a thread made with attributes whose stack size is not
//                   set (the default's) prints its stack's size and puts
//                   256 KiB of it to use while it burns CPU.
//   sigsuspend_own  blocks SIGRTMAX-4, sends it to itself, waits in sigsuspend
//                   with the old mask: its handler runs once.
//   sigrelse_own    sighold(SIGRTMAX-4), raise it, sigrelse: the handler runs
//                   after the release, not before.
//   fiber           a coroutine on a 16 KiB makecontext stack (a guard page
//                   below) with 14 KiB in use sleeps 150 ms in nanosleep (bound
//                   first on the main stack, as a program's own earlier
//                   calls would have).
//   fiber_burn N [noalt]
//                   a coroutine on a 16 KiB makecontext stack (a guard page
//                   below) with N bytes in use burns 0.2 s of CPU; with
//                   "noalt" the thread has no alternate signal stack, so
//                   every signal lands on the coroutine's stack.
//   close_errno     close(2) with errno 0 before: prints the result and errno.
//   closes_stdio FILE  prints a line, closes fds 1 and 2, lives 6 s, then
//                   creates FILE.
//   daemon_pipe [FILE]  forks a child that points 0-2 at /dev/null, calls
//                   setsid, lives 6 s and then creates FILE; the parent exits
//                   at once.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static void on_sig(int s) { (void)s; got++; }

static void* churn(void* a) {
  void* p[64];
  for (int r = 0; r < 20; r++) {
    for (int i = 0; i < 64; i++) p[i] = malloc(16 + i * 8);
    for (int i = 0; i < 64; i++) free(p[i]);
  }
  return a;
}

static void* faulting(void* a) {
  volatile long x = 0;
  for (long i = 0; i < 30000000; i++) x += i;
  *(volatile int*)0 = 1;
  return a;
}

static int pad_bytes;
__attribute__((noinline)) static long small_burn(void) {
  volatile long x = 0;
  for (long i = 0; i < 50000000; i++) x += i;
  return x;
}
static void* small(void* a) {
  volatile char pad[pad_bytes];
  memset((char*)pad, 1, (size_t)pad_bytes);
  return (void*)(small_burn() + pad[0] + (long)a);
}

static void* default_sized(void* a) {
  pthread_attr_t at;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &at) == 0) {
    pthread_attr_getstacksize(&at, &size);
    pthread_attr_destroy(&at);
  }
  printf("stack %zu KiB\n", size >> 10);
  fflush(stdout);
  pad_bytes = 256 << 10;
  return small(a);
}

static ucontext_t fiber_main, fiber_ctx;
__attribute__((noinline)) static void fiber_sleep(void) {
  struct timespec t = {0, 150000000};
  nanosleep(&t, NULL);
}
static void fiber_body(void) {
  volatile char buf[14336];
  memset((char*)buf, 0, sizeof buf);
  fiber_sleep();
  buf[0] = 1;
}

static size_t fiber_used;
static volatile unsigned long fiber_sink;
__attribute__((noinline)) static void fiber_spin(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  const long long end = t.tv_sec * 1000000000LL + t.tv_nsec + 200000000LL;
  do {
    for (int i = 0; i < 10000; i++) fiber_sink = fiber_sink * 31 + (unsigned long)i;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  } while (t.tv_sec * 1000000000LL + t.tv_nsec < end);
}
static void fiber_burner(void) {
  volatile char buf[fiber_used];
  memset((char*)buf, 0, fiber_used);
  fiber_spin();
  buf[0] = 1;
}

// A coroutine's stack from the program's own memory: a guard page below.
static void run_fiber(void (*body)(void)) {
  const size_t size = 16384, page = 4096;
  char* m = mmap(NULL, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  mprotect(m, page, PROT_NONE);
  getcontext(&fiber_ctx);
  fiber_ctx.uc_stack.ss_sp = m + page;
  fiber_ctx.uc_stack.ss_size = size;
  fiber_ctx.uc_link = &fiber_main;
  makecontext(&fiber_ctx, body, 0);
  swapcontext(&fiber_main, &fiber_ctx);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  int rt = SIGRTMAX - 4;
  if (!strcmp(mode, "lostterm")) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &s, NULL);  // main never takes it
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int n = 0;; n++) {
      pthread_t th[4];
      pthread_sigmask(SIG_UNBLOCK, &s, NULL);  // the workers may
      for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, churn, NULL);
      pthread_sigmask(SIG_BLOCK, &s, NULL);
      if (n == 200) kill(getpid(), SIGTERM);
      for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
      clock_gettime(CLOCK_MONOTONIC, &t);
      if (t.tv_sec - t0.tv_sec >= 3) break;
    }
    printf("survived SIGTERM\n");
  } else if (!strcmp(mode, "blocked_fault")) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);  // the worker inherits it
    pthread_t t;
    pthread_create(&t, NULL, faulting, NULL);
    pthread_join(t, NULL);
  } else if (!strcmp(mode, "smallstack")) {
    pad_bytes = argc > 2 ? atoi(argv[2]) : 3000;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 16384);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
      if (pthread_create(&t[i], &at, small, NULL)) return 3;
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("ok with %d bytes used\n", pad_bytes);
  } else if (!strcmp(mode, "defaultattr")) {
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_JOINABLE);
    pthread_t t;
    if (pthread_create(&t, &at, default_sized, NULL)) return 3;
    pthread_join(t, NULL);
    printf("ok\n");
  } else if (!strcmp(mode, "sigsuspend_own")) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sigaction(rt, &sa, NULL);
    sigset_t b, old;
    sigemptyset(&b);
    sigaddset(&b, rt);
    sigprocmask(SIG_BLOCK, &b, &old);
    kill(getpid(), rt);
    int loops = 0;
    while (!got && loops < 100000) {
      sigsuspend(&old);
      loops++;
    }
    printf("got=%d loops=%d\n", (int)got, loops);
  } else if (!strcmp(mode, "sigrelse_own")) {
    signal(rt, on_sig);
    sighold(rt);
    raise(rt);
    printf("while held: got=%d\n", (int)got);
    sigrelse(rt);
    printf("after sigrelse: got=%d\n", (int)got);
  } else if (!strcmp(mode, "fiber")) {
    struct timespec zero = {0, 0};
    nanosleep(&zero, NULL);  // its PLT slot bound here: lazy binding wants more stack than 2 KiB
    run_fiber(fiber_body);
    printf("fiber returned\n");
  } else if (!strcmp(mode, "close_errno")) {
    errno = 0;
    int r = close(2);
    printf("close(2) = %d, errno %d\n", r, errno);
  } else if (!strcmp(mode, "fork_errno")) {
    errno = EXDEV;
    pid_t pid = fork();
    int e = errno;
    if (pid == 0) {
      printf("child errno %d\n", e);
      fflush(stdout);
      _exit(0);
    }
    waitpid(pid, NULL, 0);
    printf("parent errno %d\n", e);
  } else if (!strcmp(mode, "fork_at_start")) {
    // Forks at once, while the shim's snapshot worker may be loading libdw.
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long spin_us = argc > 2 ? atol(argv[2]) : 0;
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < spin_us);
    for (int i = 0; i < 5; i++) {
      pid_t pid = fork();
      if (pid == 0) {
        execl("/bin/true", "true", (char*)NULL);
        _exit(127);
      }
      int st;
      waitpid(pid, &st, 0);
    }
    printf("forked 5\n");
  } else if (!strcmp(mode, "closes_stdio")) {
    printf("closing stdio\n");
    fflush(stdout);
    close(1);
    close(2);
    sleep(6);
    if (argc > 2) close(open(argv[2], O_WRONLY | O_CREAT, 0644));
  } else if (!strcmp(mode, "fiber_burn")) {
    fiber_used = argc > 2 ? (size_t)atol(argv[2]) : 11264;
    if (argc > 3 && !strcmp(argv[3], "noalt")) {
      stack_t off = {NULL, SS_DISABLE, 0};
      sigaltstack(&off, NULL);
    }
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);  // bound on the main stack
    run_fiber(fiber_burner);
    printf("fiber burned\n");
  } else if (!strcmp(mode, "daemon_pipe")) {
    if (fork() == 0) {
      int fd = open("/dev/null", O_RDWR);
      dup2(fd, 0);
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
      setsid();
      sleep(6);  // the daemon lives on
      if (argc > 2) close(open(argv[2], O_WRONLY | O_CREAT, 0644));  // and says when it is gone
      _exit(0);
    }
    printf("parent exits\n");
  } else {
    fprintf(stderr, "review_habits: unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}
