// st_signal: dies of one fatal signal, arriving the way that signal really
// arrives. Before that it burns ~0.2 s of CPU in sig_work and holds 8 MiB at
// sig_hold, so that both profiles have something to show.
// usage: st_signal SIGNAME MODE
//   MODE natural: the signal's own cause
//     SIGSEGV  a write through a null pointer      SIGBUS  a read past the end of a mapped empty file
//     SIGFPE   an integer division by zero         SIGILL  ud2 (__builtin_trap)
//     SIGABRT  abort()                             SIGPIPE a write to a pipe with no reader
//     SIGALRM  alarm(1), then busy                 SIGXCPU RLIMIT_CPU soft limit 1 s past now, then busy
//     SIGXFSZ  RLIMIT_FSIZE soft limit 1 MiB, then 2 MiB of writes to ./big.out
//     SIGTRAP  int3                                SIGSYS  a system call seccomp traps
//     others   kill(getpid(), sig)
//   MODE thread: the natural cause, in a second thread (main waits in pthread_join)
//   MODE overflow: (SIGSEGV only) unbounded recursion in recurse: a stack overflow
//   MODE raise: raise(sig)
//   MODE wait:  prints "ready", then stays busy in wait_work until a signal
//               comes from outside (gives up after 30 s: exit 99)
// SIGNAME: a name below, or SIGRTMIN+N / SIGRTMAX-N (kill -l's names).
// A third argument "quick" burns a tenth of the CPU (~0.02 s).
// If the process survives its signal it prints "survived" and exits 0.
// stdout: "ready pid=N" before the signal (written with write(2)).
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
char* held;  // not static: the compiler must keep the allocation
static int* volatile null_ptr;
static volatile int zero, one = 1;

static const struct { const char* name; int sig; } kSigs[] = {
    {"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},   {"SIGHUP", SIGHUP},   {"SIGQUIT", SIGQUIT},
    {"SIGABRT", SIGABRT}, {"SIGSEGV", SIGSEGV}, {"SIGBUS", SIGBUS},   {"SIGFPE", SIGFPE},
    {"SIGILL", SIGILL},   {"SIGPIPE", SIGPIPE}, {"SIGALRM", SIGALRM}, {"SIGXCPU", SIGXCPU},
    {"SIGXFSZ", SIGXFSZ}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGTRAP", SIGTRAP},
    {"SIGSYS", SIGSYS},   {"SIGPROF", SIGPROF}, {"SIGVTALRM", SIGVTALRM}, {"SIGIO", SIGIO},
    {"SIGPWR", SIGPWR},   {"SIGSTKFLT", SIGSTKFLT},
};

static int rt_signal(const char* name) {
  int n = 0;
  if (!strcmp(name, "SIGRTMIN")) return SIGRTMIN;
  if (!strcmp(name, "SIGRTMAX")) return SIGRTMAX;
  if (sscanf(name, "SIGRTMIN+%d", &n) == 1 && n > 0 && SIGRTMIN + n <= SIGRTMAX) return SIGRTMIN + n;
  if (sscanf(name, "SIGRTMAX-%d", &n) == 1 && n > 0 && SIGRTMAX - n >= SIGRTMIN) return SIGRTMAX - n;
  return 0;
}

static unsigned long g_burn = 200000000UL;

// seccomp's trap for getpriority with a marker no one else passes; every
// other call is allowed.
#define SECCOMP_MARK 0x5ec
static void trap_by_seccomp(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getpriority, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_MARK, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("seccomp");
    exit(97);
  }
  syscall(__NR_getpriority, SECCOMP_MARK, 0);
}

static void say(const char* s) {
  if (write(1, s, strlen(s)) < 0) _exit(98);
}

static void burn(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
}

__attribute__((noinline, noclone)) void sig_work(void) { burn(g_burn); }

__attribute__((noinline, noclone)) void sig_hold(void) {
  held = malloc(8 << 20);
  memset(held, 1, 8 << 20);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Busy until a signal ends the process; 30 s at most.
__attribute__((noinline, noclone)) void wait_work(void) {
  double end = now() + 30;
  while (now() < end) burn(1000000UL);
  say("wait_work: no signal came\n");
  exit(99);
}

static void natural(int sig) {
  switch (sig) {
    case SIGSEGV:
      *null_ptr = 1;
      break;
    case SIGBUS: {
      int fd = memfd_create("st_signal", 0);
      if (fd < 0) { perror("memfd_create"); exit(97); }
      volatile char* p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) { perror("mmap"); exit(97); }
      sink = p[0];  // the file is empty: no page behind the mapping
      break;
    }
    case SIGFPE:
      sink = one / zero;  // volatile both: gcc turns 1/x into a compare
      break;
    case SIGILL:
      __builtin_trap();
      break;
    case SIGABRT:
      abort();
    case SIGPIPE: {
      int fds[2];
      if (pipe(fds) != 0) { perror("pipe"); exit(97); }
      close(fds[0]);
      if (write(fds[1], "x", 1) < 0) perror("write");
      break;
    }
    case SIGALRM:
      alarm(1);
      wait_work();
      break;
    case SIGXCPU: {
      struct rusage ru;
      getrusage(RUSAGE_SELF, &ru);
      struct rlimit rl;
      getrlimit(RLIMIT_CPU, &rl);
      rl.rlim_cur = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1;
      if (setrlimit(RLIMIT_CPU, &rl) != 0) { perror("setrlimit"); exit(97); }
      wait_work();
      break;
    }
    case SIGXFSZ: {
      struct rlimit rl;
      getrlimit(RLIMIT_FSIZE, &rl);
      rl.rlim_cur = 1 << 20;
      if (setrlimit(RLIMIT_FSIZE, &rl) != 0) { perror("setrlimit"); exit(97); }
      int fd = open("big.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) { perror("open"); exit(97); }
      // The write that crosses the limit is cut short; the next one, at
      // the limit, gets SIGXFSZ.
      static char buf[1 << 18];
      for (int i = 0; i < 8; i++)
        if (write(fd, buf, sizeof buf) < 0) perror("write");
      break;
    }
    case SIGTRAP:
      __asm__ volatile("int3");
      break;
    case SIGSYS:
      trap_by_seccomp();
      break;
    default:
      kill(getpid(), sig);
  }
}

// Each frame keeps 1 KiB live across the call, so it is not a tail call.
__attribute__((noinline, noclone)) unsigned long recurse(unsigned long n) {
  volatile char pad[1024];
  pad[n % sizeof pad] = (char)n;
  return recurse(n + 1) + pad[(n * 7) % sizeof pad];
}

static int g_sig;
static void* natural_thread(void* arg) {
  natural(g_sig);
  return arg;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: st_signal SIGNAME natural|raise|wait\n");
    return 2;
  }
  int sig = 0;
  for (size_t i = 0; i < sizeof kSigs / sizeof kSigs[0]; i++)
    if (!strcmp(argv[1], kSigs[i].name)) sig = kSigs[i].sig;
  if (!sig) sig = rt_signal(argv[1]);
  if (argc > 3 && !strcmp(argv[3], "quick")) g_burn /= 10;
  if (!sig) {
    fprintf(stderr, "st_signal: unknown signal %s\n", argv[1]);
    return 2;
  }
  sig_work();
  sig_hold();
  char line[64];
  snprintf(line, sizeof line, "ready pid=%d\n", (int)getpid());
  say(line);
  if (!strcmp(argv[2], "natural")) natural(sig);
  else if (!strcmp(argv[2], "raise")) raise(sig);
  else if (!strcmp(argv[2], "overflow")) sink = recurse(0);
  else if (!strcmp(argv[2], "thread")) {
    pthread_t t;
    g_sig = sig;
    if (pthread_create(&t, NULL, natural_thread, NULL) != 0) { perror("pthread_create"); return 97; }
    pthread_join(t, NULL);
  }
  else if (!strcmp(argv[2], "wait")) wait_work();
  say("survived\n");
  return 0;
}
