// st_stress: 4 threads allocate and free at random (malloc, calloc, realloc,
// free; 16 B .. 64 KiB; up to 256 live blocks each) while the main thread,
// after DELAY_US microseconds, ends the process as MODE says:
//   exit   exit(7) from main
//   term   raise(SIGTERM) from main
//   race   one allocating thread calls exit(7) while main calls
//          kill(getpid(), SIGTERM), released together from a spin barrier
// usage: st_stress MODE DELAY_US SEED
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS 4
#define SLOTS 256

static volatile int go_exit, armed, arrived;
static unsigned long seed;

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

static void* worker(void* arg) {
  long k = (long)arg;
  unsigned long rng = seed * 0x9e3779b97f4a7c15UL + (unsigned long)k + 1;
  void* slots[SLOTS] = {0};
  for (;;) {
    churn(&rng, slots);
    if (k == 0 && __atomic_load_n(&armed, __ATOMIC_ACQUIRE)) {
      __atomic_add_fetch(&arrived, 1, __ATOMIC_SEQ_CST);
      while (!__atomic_load_n(&go_exit, __ATOMIC_ACQUIRE)) {
      }
      exit(7);
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: st_stress exit|term|race DELAY_US SEED\n");
    return 2;
  }
  const char* mode = argv[1];
  long delay = atol(argv[2]);
  seed = strtoul(argv[3], NULL, 10);
  pthread_t t[THREADS];
  for (long k = 0; k < THREADS; k++)
    if (pthread_create(&t[k], NULL, worker, (void*)k) != 0) {
      perror("pthread_create");
      return 1;
    }
  struct timespec ts = {delay / 1000000, (delay % 1000000) * 1000};
  nanosleep(&ts, NULL);
  if (!strcmp(mode, "exit")) exit(7);
  if (!strcmp(mode, "term")) {
    raise(SIGTERM);
    return 1;
  }
  if (!strcmp(mode, "race")) {
    __atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&arrived, __ATOMIC_ACQUIRE)) {
    }
    __atomic_store_n(&go_exit, 1, __ATOMIC_RELEASE);
    kill(getpid(), SIGTERM);
    for (;;) pause();
  }
  fprintf(stderr, "st_stress: unknown mode %s\n", mode);
  return 2;
}
