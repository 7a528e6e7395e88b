// thread_arenas: which jemalloc arena a thread allocates from (mallctl
// "thread.arena", exported by the shim), for a thread started while no
// other is alive, and for two that run at once.
// stdout: "alone=A", "together=B,C" (arena numbers).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

// Looked up, not linked: only the shim (or a jemalloc) provides it.
typedef int (*Mallctl)(const char*, void*, size_t*, void*, size_t);
static Mallctl mallctl;

static pthread_barrier_t both;

static unsigned arena_now(void) {
  free(malloc(64));  // the thread's allocator state exists from its first allocation
  unsigned a = 999;
  size_t sz = sizeof a;
  if (mallctl("thread.arena", &a, &sz, NULL, 0) != 0) return 998;
  return a;
}

static void* alone(void* out) {
  *(unsigned*)out = arena_now();
  return NULL;
}

static void* together(void* out) {
  pthread_barrier_wait(&both);  // both alive before either allocates
  *(unsigned*)out = arena_now();
  pthread_barrier_wait(&both);
  return NULL;
}

int main(void) {
  mallctl = (Mallctl)dlsym(RTLD_DEFAULT, "mallctl");
  if (!mallctl) {
    fprintf(stderr, "thread_arenas: no mallctl (run it under the shim)\n");
    return 2;
  }
  unsigned a = 0, b = 0, c = 0;
  pthread_t t, u;
  pthread_create(&t, NULL, alone, &a);
  pthread_join(t, NULL);
  pthread_barrier_init(&both, NULL, 2);
  pthread_create(&t, NULL, together, &b);
  pthread_create(&u, NULL, together, &c);
  pthread_join(t, NULL);
  pthread_join(u, NULL);
  printf("alone=%u\ntogether=%u,%u\n", a, b, c);
  return 0;
}
