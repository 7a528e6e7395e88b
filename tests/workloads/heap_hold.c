// heap_hold: holds a known number of bytes at named call sites when it stops.
//   site_big    10 blocks of 4 MiB  = 40 MiB, held
//   site_small  786432 blocks of 64 B = 48 MiB, held
//   site_freed  1024 blocks of 64 KiB = 64 MiB, allocated and all freed
//               before the stop (alloc_space counts it, inuse_space must not)
// All sizes are jemalloc size classes, so usable size == requested size.
// Pointers live in static arrays (not on the heap) so nothing else is big.
// usage: heap_hold [return|exit]   exit: leaves through exit(0) from a
//        nested function instead of returning from main.
// stdout: one "truth" line per site, which the tests read, then "done".
// The held blocks are freed by an atexit handler (after the profile).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG_N 10
#define BIG_SIZE (4UL << 20)
#define SMALL_N 786432
#define SMALL_SIZE 64UL
#define FREED_N 1024
#define FREED_SIZE (64UL << 10)

static void* big[BIG_N];
static void* small[SMALL_N];
static void* freed[FREED_N];

__attribute__((noinline, noclone)) void site_big(void) {
  for (int i = 0; i < BIG_N; i++) {
    big[i] = malloc(BIG_SIZE);
    memset(big[i], 0x5a, BIG_SIZE);
  }
}

__attribute__((noinline, noclone)) void site_small(void) {
  for (int i = 0; i < SMALL_N; i++) {
    small[i] = malloc(SMALL_SIZE);
    memset(small[i], i & 0xff, SMALL_SIZE);
  }
}

__attribute__((noinline, noclone)) void site_freed(void) {
  for (int i = 0; i < FREED_N; i++) {
    freed[i] = malloc(FREED_SIZE);
    memset(freed[i], 0xa5, FREED_SIZE);
  }
  unsigned long sum = 0;
  for (int i = 0; i < FREED_N; i++) {
    sum += ((unsigned char*)freed[i])[i];
    free(freed[i]);
    freed[i] = NULL;
  }
  if (sum != 0xa5UL * FREED_N) abort();
}

static void release_all(void) {
  for (int i = 0; i < BIG_N; i++) free(big[i]);
  for (int i = 0; i < SMALL_N; i++) free(small[i]);
}

__attribute__((noinline, noclone)) void leave_via_exit(void) {
  fflush(stdout);
  exit(0);
}

int main(int argc, char** argv) {
  int via_exit = argc > 1 && strcmp(argv[1], "exit") == 0;
  site_freed();
  site_big();
  site_small();
  atexit(release_all);
  printf("truth site_big inuse_space=%lu inuse_objects=%d alloc_space=%lu\n", BIG_N * BIG_SIZE,
         BIG_N, BIG_N * BIG_SIZE);
  printf("truth site_small inuse_space=%lu inuse_objects=%d alloc_space=%lu\n",
         SMALL_N * SMALL_SIZE, SMALL_N, SMALL_N * SMALL_SIZE);
  printf("truth site_freed inuse_space=0 inuse_objects=0 alloc_space=%lu alloc_objects=%d\n",
         FREED_N * FREED_SIZE, FREED_N);
  printf("heap_hold: done (%s)\n", via_exit ? "exit" : "return");
  fprintf(stderr, "heap_hold: stderr line\n");
  if (via_exit) leave_via_exit();
  return 0;
}
