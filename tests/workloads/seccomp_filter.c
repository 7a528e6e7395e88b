/* seccomp_filter KILLED ACTION HOW END: burns CPU in before_filter(), puts
 * in force a seccomp filter that answers system call KILLED (a number) with
 * ACTION (kill: SECCOMP_RET_KILL_PROCESS, trap: SECCOMP_RET_TRAP, errno:
 * EPERM) through HOW (prctl; syscall: libseccomp's way; raw: a system call
 * instruction of its own, with a SIGSYS handler set through
 * syscall(SYS_rt_sigaction) that reports a crash and exits 99, as
 * Chromium's sandbox does), then starts 4
 * threads that burn CPU in after_filter() and joins them. END: exit (return
 * from main), term (raise SIGTERM), or exec (execs itself as
 * "seccomp_filter child", which starts 4 threads under the filter it
 * inherits). Prints what it did, so a run under the shim can be compared
 * with a plain one. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile double sink;

__attribute__((noinline)) static void burn(long n) {
  double x = 0;
  for (long i = 0; i < n; i++) x += (double)i * 0.5;
  sink += x;
}

__attribute__((noinline)) static void before_filter(void) { burn(60000000); }
__attribute__((noinline)) static void* after_filter(void* arg) {
  (void)arg;
  burn(30000000);
  return NULL;
}

static int child(void) {
  pthread_t t[4];
  int started = 0;
  for (int i = 0; i < 4; i++) started += pthread_create(&t[i], NULL, after_filter, NULL) == 0;
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
  printf("exec'd image started %d threads\n", started);
  return 0;
}

static void on_sigsys(int sig, siginfo_t* si, void* uc) {
  (void)sig, (void)uc;
  char msg[64];
  int n = snprintf(msg, sizeof msg, "crash: system call %d trapped\n", si->si_syscall);
  write(1, msg, (size_t)n);
  _exit(99);
}

/* The kernel's sigaction and a restorer, as a program that bypasses libc
 * passes them. */
struct kernel_action {
  void (*handler)(int, siginfo_t*, void*);
  unsigned long flags;
  void (*restorer)(void);
  unsigned long mask;
};
void seccomp_filter_restorer(void);
__asm__(".text\n seccomp_filter_restorer:\n movq $15, %rax\n syscall\n");

static long raw_seccomp(struct sock_fprog* prog) {
  long r;
  __asm__ volatile("syscall"
                   : "=a"(r)
                   : "0"((long)SYS_seccomp), "D"((long)SECCOMP_SET_MODE_FILTER), "S"(0L), "d"(prog)
                   : "rcx", "r11", "memory");
  return r;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "child") == 0) return child();
  if (argc != 5) {
    fprintf(stderr, "usage: seccomp_filter NR kill|trap|errno prctl|syscall exit|term\n");
    return 2;
  }
  int nr = atoi(argv[1]);
  unsigned action = strcmp(argv[2], "kill") == 0   ? SECCOMP_RET_KILL_PROCESS
                    : strcmp(argv[2], "trap") == 0 ? SECCOMP_RET_TRAP
                                                   : SECCOMP_RET_ERRNO | EPERM;
  before_filter();
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, action),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    perror("no_new_privs");
    return 2;
  }
  int rc;
  if (strcmp(argv[3], "raw") == 0) {
    struct kernel_action ka = {on_sigsys, SA_SIGINFO | 0x04000000 /* SA_RESTORER */, seccomp_filter_restorer, 0};
    if (syscall(SYS_rt_sigaction, SIGSYS, &ka, NULL, 8) != 0) {
      perror("rt_sigaction");
      return 2;
    }
    rc = (int)raw_seccomp(&prog);
  } else if (strcmp(argv[3], "syscall") == 0) {
    rc = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
  } else {
    rc = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
  }
  if (rc != 0) {
    perror("seccomp");
    return 2;
  }
  pthread_t t[4];
  int started = 0;
  for (int i = 0; i < 4; i++) started += pthread_create(&t[i], NULL, after_filter, NULL) == 0;
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
  printf("filtered %d, started %d threads\n", nr, started);
  fflush(stdout);
  if (strcmp(argv[4], "term") == 0) raise(SIGTERM);
  if (strcmp(argv[4], "exec") == 0) {
    execl("/proc/self/exe", argv[0], "child", (char*)NULL);
    perror("exec");
    return 3;
  }
  return 0;
}
