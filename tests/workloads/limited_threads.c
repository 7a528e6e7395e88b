// limited_threads: starts N threads (default 8) that only compute, joins the
// ones that started, and prints how many pthread_create calls succeeded.
// Meant to run under a memory limit (RLIMIT_DATA, RLIMIT_AS) set by its
// parent: glibc maps each thread's stack, so under a tight limit some
// creations fail with EAGAIN, and the count shows how many.
// usage: limited_threads [N [alloc]]
//   alloc: each thread also mallocs (and frees) 64 bytes as it starts
// stdout: "started K of N" then "sum S" (S the threads' results, fixed).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 64

static int g_alloc;

static void* work(void* arg) {
  unsigned long x = (unsigned long)arg, i;
  if (g_alloc) {
    volatile char* p = malloc(64);
    if (!p) return (void*)0xffUL;
    p[0] = 1;
    free((void*)p);
  }
  for (i = 0; i < 20000000UL; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
  return (void*)(x & 0xff);
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8, started = 0;
  if (n < 1 || n > MAX_THREADS) n = 8;
  g_alloc = argc > 2 && !strcmp(argv[2], "alloc");
  pthread_t t[MAX_THREADS];
  int ok[MAX_THREADS];
  for (int i = 0; i < n; i++) {
    ok[i] = pthread_create(&t[i], NULL, work, (void*)(unsigned long)(i + 1)) == 0;
    started += ok[i];
  }
  unsigned long sum = 0;
  for (int i = 0; i < n; i++) {
    void* rv;
    if (ok[i] && pthread_join(t[i], &rv) == 0) sum += (unsigned long)rv;
  }
  printf("started %d of %d\n", started, n);
  // Which threads started depends on the limit, not on timing: the
  // creations are in order and each takes the next stack.
  printf("sum %lu\n", sum);
  return 0;
}
