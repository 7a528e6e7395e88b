// st_stress: the stop paths under load, for the randomized stress run
// (tests/integration/test_stress.py). Three threads allocate and free at
// random (malloc, calloc, realloc, free; 16 B .. 64 KiB; up to 256 live
// blocks each) and a fourth does the same with every signal blocked, while
// the main thread, after DELAY_US microseconds, ends the process as MODE says.
// Nothing is written to stderr; stdout gets "ready" (outside, outrace) and
// nothing else, so every stderr line is the shim's.
//
// usage: st_stress MODE DELAY_US SEED
//   exit      exit(7)                       _exit     _exit(9)
//   return    return 11 from main           term      raise(SIGTERM)
//   segv      a write through NULL          abort     abort()
//   outside   prints "ready", then waits: the test sends SIGTERM
//   outrace   prints "ready", exit(7) after DELAY_US: the test sends SIGTERM
//             at a moment of its own, before, during or after that exit
//   exec      execs itself as "after": a new image with the same threads,
//             which exits 13 after DELAY_US
//   fork      forks; the child (its own allocating thread) ends after a
//             few ms as SEED picks: exit(3), _exit(4), SIGTERM or SIGSEGV;
//             the parent waits and exits 20+code or 40+signal
//   race      (or race_exit_term) a thread's exit(7) and main's
//             kill(getpid(), SIGTERM), released together from a spin barrier
//   race_exit_exit    exit(7) on one thread, exit(8) on another
//   race_exit_segv    exit(7) on a thread, a write through NULL on main
//   race_exec_exit    a thread execs "after" while main calls exit(7)
//   race_fork_exit    main forks (the child exits 3 at once) while a
//                     thread calls exit(7)
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define THREADS 4
#define SLOTS 256

static unsigned long seed;
static const char* self;
static int* volatile null_ptr;

// The spin barrier of the race modes: the main thread arms, thread 0 (and
// thread 1 for race_exit_exit) arrive, then all go at once.
static volatile int armed, arrived, go;
static volatile int thread_action;  // what thread 0 (and 1) do when released
static int two_racers;               // race_exit_exit: set before the threads start

static unsigned long xorshift(unsigned long* s) {
  unsigned long x = *s;
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return *s = x;
}

__attribute__((noinline, noclone)) void churn(unsigned long* rng, void** slots) {
  unsigned long r = xorshift(rng);
  int i = (int)(r % SLOTS);
  size_t n = 16 + (r >> 16) % (64 << 10);
  switch ((r >> 40) % 4) {
    case 0:
      free(slots[i]);
      slots[i] = malloc(n);
      if (slots[i]) memset(slots[i], 1, n < 256 ? n : 256);
      break;
    case 1:
      free(slots[i]);
      slots[i] = calloc(1, n);
      break;
    case 2: {
      void* p = realloc(slots[i], n);
      if (p) slots[i] = p;
      break;
    }
    default:
      free(slots[i]);
      slots[i] = NULL;
  }
}

static void exec_after(void) {
  char delay[32], s[32];
  snprintf(delay, sizeof delay, "%lu", seed % 20000);
  snprintf(s, sizeof s, "%lu", seed);
  execl(self, self, "after", delay, s, (char*)NULL);
  _exit(126);
}

static void released(long k) {
  __atomic_add_fetch(&arrived, 1, __ATOMIC_SEQ_CST);
  while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) {
  }
  switch (thread_action) {
    case 'x': exit(k == 0 ? 7 : 8);
    case 'e': exec_after(); break;
    default: exit(7);
  }
}

static void* worker(void* arg) {
  long k = (long)arg;
  if (k == THREADS - 1) {  // the signal-blocking thread (a worker pool's)
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
  }
  unsigned long rng = seed * 0x9e3779b97f4a7c15UL + (unsigned long)k + 1;
  void* slots[SLOTS] = {0};
  int racer = k == 0 || (k == 1 && two_racers);
  for (;;) {
    churn(&rng, slots);
    if (racer && __atomic_load_n(&armed, __ATOMIC_ACQUIRE)) released(k);
  }
  return NULL;
}

static void start_threads(int n) {
  for (long k = 0; k < n; k++) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, (void*)k) != 0) {
      perror("pthread_create");
      exit(1);
    }
  }
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

// Arms the racers, waits until they are at the barrier, releases them.
static void race(int action, int racers) {
  thread_action = action;
  __atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
  while (__atomic_load_n(&arrived, __ATOMIC_ACQUIRE) < racers) {
  }
  __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
}

static int fork_child(void) {
  pid_t p = fork();
  if (p < 0) return 1;
  if (p == 0) {
    start_threads(1);
    sleep_us(1000 + (long)(seed % 5000));
    switch (seed % 4) {
      case 0: exit(3);
      case 1: _exit(4);
      case 2: raise(SIGTERM); break;
      default: *null_ptr = 1;
    }
    _exit(99);
  }
  int st;
  while (waitpid(p, &st, 0) < 0) {
  }
  return WIFEXITED(st) ? 20 + WEXITSTATUS(st) : 40 + WTERMSIG(st);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: st_stress MODE DELAY_US SEED\n");
    return 2;
  }
  const char* mode = argv[1];
  long delay = atol(argv[2]);
  seed = strtoul(argv[3], NULL, 10);
  self = "/proc/self/exe";
  two_racers = !strcmp(mode, "race_exit_exit");
  start_threads(THREADS);
  if (!strcmp(mode, "outside") || !strcmp(mode, "outrace")) {
    if (write(1, "ready\n", 6) != 6) return 1;
  }
  sleep_us(delay);
  if (!strcmp(mode, "exit")) exit(7);
  if (!strcmp(mode, "_exit")) _exit(9);
  if (!strcmp(mode, "return")) return 11;
  if (!strcmp(mode, "term")) raise(SIGTERM);
  if (!strcmp(mode, "segv")) *null_ptr = 1;
  if (!strcmp(mode, "abort")) abort();
  if (!strcmp(mode, "outside")) for (;;) pause();
  if (!strcmp(mode, "outrace")) exit(7);
  if (!strcmp(mode, "after")) exit(13);
  if (!strcmp(mode, "exec")) exec_after();
  if (!strcmp(mode, "fork")) exit(fork_child());
  if (!strcmp(mode, "race") || !strcmp(mode, "race_exit_term")) {
    race('x', 1);
    kill(getpid(), SIGTERM);
    for (;;) pause();
  }
  if (!strcmp(mode, "race_exit_exit")) {
    race('x', 2);
    for (;;) pause();
  }
  if (!strcmp(mode, "race_exit_segv")) {
    race('x', 1);
    *null_ptr = 1;
  }
  if (!strcmp(mode, "race_exec_exit")) {
    race('e', 1);
    exit(7);
  }
  if (!strcmp(mode, "race_fork_exit")) {
    race('x', 1);
    if (fork() == 0) _exit(3);
    for (;;) pause();
  }
  fprintf(stderr, "st_stress: unknown mode %s\n", mode);
  return 2;
}
