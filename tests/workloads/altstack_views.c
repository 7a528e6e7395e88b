/* altstack_views: what a program learns of its alternate signal stacks.
 * main asks sigaltstack() whether it has one; then 20,000 threads, one
 * after another, each ask, set one of their own and switch it off, as
 * Rust's runtime and others do. stdout: what they saw (the same with and
 * without a profiler that keeps stacks of its own); stderr: "vmsize_kib N"
 * at the end, the address space left behind. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* body(void* arg) {
  stack_t old;
  sigaltstack(NULL, &old);
  static __thread char mine[32768];
  stack_t ss = {mine, 0, sizeof mine};
  sigaltstack(&ss, NULL);
  stack_t off = {NULL, SS_DISABLE, 0};
  sigaltstack(&off, NULL);
  return (void*)(long)(old.ss_flags & SS_DISABLE);
}

int main(void) {
  stack_t old;
  sigaltstack(NULL, &old);
  printf("main: %s\n", old.ss_flags & SS_DISABLE ? "no alternate stack" : "an alternate stack");
  long none = 0;
  for (int i = 0; i < 20000; ++i) {
    pthread_t t;
    void* r;
    if (pthread_create(&t, 0, body, 0) != 0) return 2;
    pthread_join(t, &r);
    none += r != 0;
  }
  printf("threads that found none: %ld of 20000\n", none);
  char line[256];
  FILE* f = fopen("/proc/self/status", "r");
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmSize:", 7) == 0) fprintf(stderr, "vmsize_kib %ld\n", atol(line + 7));
  return 0;
}
