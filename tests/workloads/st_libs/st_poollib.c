// st_poollib: a shared library that starts threads of its own (compiled at
// run time by tests/integration/test_cpu_threads.py, never by the Makefile).
//  - its constructor, which runs before main (and possibly before the
//    shim's), starts a thread named "ctor-burn" that burns ST_CTOR_SECONDS
//    (default 1.0) of its own CPU in ctor_thread_burn;
//  - pool_start(n, seconds) starts n threads "pool-K" that each burn `seconds`
//    of their CPU in pool_worker_burn; pool_join() waits for them;
//  - ctor_join() waits for the constructor's thread; *_tid() and *_cpu_ns()
//    report what each thread was and used.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXPOOL 16

static volatile unsigned long sink[(MAXPOOL + 1) * 8];
static pthread_t ctor_thread, pool[MAXPOOL];
static int pool_n;
static double pool_seconds;
static pid_t tids[MAXPOOL + 1];
static long long cpu[MAXPOOL + 1];

static long long thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void burn_for(int slot, double seconds) {
  long long end = thread_cpu_ns() + (long long)(seconds * 1e9);
  unsigned long x = sink[slot * 8];
  while (thread_cpu_ns() < end) {
    for (int i = 0; i < 100000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink[slot * 8] = x;
  }
}

__attribute__((noinline, noclone)) void ctor_thread_burn(double seconds) { burn_for(MAXPOOL, seconds); }
__attribute__((noinline, noclone)) void pool_worker_burn(int k, double seconds) { burn_for(k, seconds); }

static void* ctor_main(void* arg) {
  tids[MAXPOOL] = (pid_t)syscall(SYS_gettid);
  pthread_setname_np(pthread_self(), "ctor-burn");
  const char* s = getenv("ST_CTOR_SECONDS");
  ctor_thread_burn(s ? atof(s) : 1.0);
  cpu[MAXPOOL] = thread_cpu_ns();
  return arg;
}

__attribute__((constructor)) static void start_ctor_thread(void) {
  if (pthread_create(&ctor_thread, NULL, ctor_main, NULL) != 0) {
    perror("st_poollib: pthread_create");
    _exit(96);
  }
}

static void* pool_main(void* arg) {
  int k = (int)(long)arg;
  tids[k] = (pid_t)syscall(SYS_gettid);
  char name[16];
  snprintf(name, sizeof name, "pool-%d", k);
  pthread_setname_np(pthread_self(), name);
  pool_worker_burn(k, pool_seconds);
  cpu[k] = thread_cpu_ns();
  return NULL;
}

void pool_start(int n, double seconds) {
  pool_n = n > MAXPOOL ? MAXPOOL : n;
  pool_seconds = seconds;
  for (int k = 0; k < pool_n; k++)
    if (pthread_create(&pool[k], NULL, pool_main, (void*)(long)k) != 0) {
      perror("st_poollib: pthread_create");
      _exit(96);
    }
}

void pool_join(void) {
  for (int k = 0; k < pool_n; k++) pthread_join(pool[k], NULL);
}

void ctor_join(void) { pthread_join(ctor_thread, NULL); }
int pool_tid(int k) { return k < 0 ? tids[MAXPOOL] : tids[k]; }
long long pool_cpu_ns(int k) { return k < 0 ? cpu[MAXPOOL] : cpu[k]; }
