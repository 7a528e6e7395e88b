/* seccomp_madvise MODE: puts in force (after PR_SET_NO_NEW_PRIVS, through
 * prctl) a seccomp filter that kills the process (SECCOMP_RET_KILL_PROCESS)
 * at madvise, then works with the heap, prints what it did and exits 4.
 * glibc's malloc makes no madvise on these paths: without the shim each
 * mode exits 4.
 *   free:   malloc(1 MiB), memset, free, 2000 times and for 0.4 s at least
 *           (an allocator that returns freed pages as time passes does it
 *           here)
 *   calloc: 200 times malloc(1 MiB), memset, free, then calloc(1 MiB) of
 *           what was just freed (an allocator that zeroes reused pages
 *           by dropping them does it here), checked zero. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

static int install(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_madvise, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    perror("no_new_privs");
    return -1;
  }
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("seccomp");
    return -1;
  }
  return 0;
}

__attribute__((noinline)) static void churn(int n) {
  for (int i = 0; i < n; i++) {
    char* p = malloc(1 << 20);
    if (!p) exit(3);
    memset(p, i, 1 << 20);
    __asm__ volatile("" : : "r"(p) : "memory");  /* or the compiler drops all three */
    free(p);
  }
}

__attribute__((noinline)) static int zeroed_reuse(int n) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    churn(1);
    unsigned char* p = calloc(1, 1 << 20);
    if (!p) exit(3);
    for (size_t j = 0; j < (1 << 20); j += 4096) bad += p[j] != 0;
    free(p);
  }
  return bad;
}

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "free") != 0 && strcmp(argv[1], "calloc") != 0)) {
    fprintf(stderr, "usage: seccomp_madvise free|calloc\n");
    return 2;
  }
  if (install() != 0) return 2;
  if (strcmp(argv[1], "free") == 0) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int n = 0;; n += 100) {
      churn(100);
      clock_gettime(CLOCK_MONOTONIC, &t);
      if (n >= 2000 && (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 400000000L) break;
    }
    printf("freed 2000 blocks or more\n");
  } else {
    printf("calloc: %d pages not zero\n", zeroed_reuse(200));
  }
  fflush(stdout);
  return 4;
}
