// st_threads: stops that happen in threads, or while threads run.
// usage: st_threads MODE [ARG]
// Every mode registers an atexit handler that prints "atexit ran" and frees
// a 16 MiB buffer held at main_hold (so a heap profile taken after the
// program's teardown would not show it).
//   thread_exit        a worker burns ~0.3 s in thread_burn, then calls exit(6);
//                      main waits in pthread_join.
//   race N             N workers burn ~0.2 s in race_burn, meet at a spin barrier
//                      and all call exit(7) at once.
//   exit_vs_term [raise]
//                      two workers meet at a spin barrier; one calls exit(7), the
//                      other kill(getpid(), SIGTERM) (or raise(SIGTERM): "raise")
//                      at the same moment. Ends with exit 7 or SIGTERM.
//   main_returns       3 workers burn forever in forever_burn; main burns ~0.2 s in
//                      main_burn and returns 9 while they run.
//   pthread_exit       2 workers each burn ~0.6 s of their CPU in worker_burn; main
//                      calls pthread_exit; the process ends (status 0) when the
//                      last worker returns.
// stdout: "ready" lines; "atexit ran" from the atexit handler.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
char* main_held;  // not static: the compiler must keep the allocation
static volatile int arrived, go;
static int nthreads;

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

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline, noclone)) void thread_burn(void) { burn(300000000UL); }
__attribute__((noinline, noclone)) void race_burn(void) { burn(200000000UL); }
__attribute__((noinline, noclone)) void main_burn(void) { burn(200000000UL); }
__attribute__((noinline, noclone)) void forever_burn(void) {
  for (;;) burn(1000000UL);
}
__attribute__((noinline, noclone)) void worker_burn(double seconds) {
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end) burn(200000UL);
}

__attribute__((noinline, noclone)) void main_hold(void) {
  main_held = malloc(16 << 20);
  memset(main_held, 1, 16 << 20);
}

static void at_exit(void) {
  free(main_held);
  main_held = NULL;
  say("atexit ran\n");
}

static void barrier(void) {
  __atomic_add_fetch(&arrived, 1, __ATOMIC_SEQ_CST);
  while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) {
  }
}

static void* t_thread_exit(void* a) {
  thread_burn();
  exit(6);
}

static void* t_race(void* a) {
  race_burn();
  barrier();
  exit(7);
}

static void* t_exit7(void* a) {
  barrier();
  exit(7);
}

static void* t_term(void* a) {
  barrier();
  if (a) raise(SIGTERM);
  else kill(getpid(), SIGTERM);
  for (;;) pause();
  return NULL;
}

static void* t_forever(void* a) {
  forever_burn();
  return a;
}

static void* t_worker(void* a) {
  worker_burn(0.6);
  return a;
}

static pthread_t start(void* (*fn)(void*), void* arg) {
  pthread_t t;
  if (pthread_create(&t, NULL, fn, arg) != 0) {
    perror("pthread_create");
    _exit(97);
  }
  return t;
}

static void release_when(int n) {
  while (__atomic_load_n(&arrived, __ATOMIC_ACQUIRE) < n) {
  }
  __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "thread_exit";
  main_hold();
  atexit(at_exit);
  if (!strcmp(mode, "thread_exit")) {
    pthread_t t = start(t_thread_exit, NULL);
    pthread_join(t, NULL);
    say("thread_exit: the worker returned?\n");
    return 1;
  }
  if (!strcmp(mode, "race")) {
    nthreads = argc > 2 ? atoi(argv[2]) : 2;
    for (int i = 0; i < nthreads; i++) start(t_race, NULL);
    release_when(nthreads);
    for (;;) pause();
  }
  if (!strcmp(mode, "exit_vs_term")) {
    int use_raise = argc > 2 && !strcmp(argv[2], "raise");
    start(t_exit7, NULL);
    start(t_term, use_raise ? (void*)1 : NULL);
    release_when(2);
    for (;;) pause();
  }
  if (!strcmp(mode, "main_returns")) {
    for (int i = 0; i < 3; i++) start(t_forever, NULL);
    main_burn();
    say("main returns\n");
    return 9;
  }
  if (!strcmp(mode, "pthread_exit")) {
    start(t_worker, NULL);
    start(t_worker, NULL);
    say("main calls pthread_exit\n");
    pthread_exit(NULL);
  }
  fprintf(stderr, "st_threads: unknown mode %s\n", mode);
  return 2;
}
