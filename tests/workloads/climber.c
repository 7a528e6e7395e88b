// climber: a service whose heap climbs, for the heap-peak tests.
//   climber TOP_MIB HOLD_MIB STEP_MS
// climb_here() allocates 4 MiB blocks (each written, so they are resident),
// one every STEP_MS, until it holds TOP_MIB, or until the kernel's OOM
// killer ends it; it stays at the top 200 ms, then frees them all;
// hold_here() then allocates HOLD_MIB and the program prints "ready" and
// waits to be killed (at most 60 s, then exits 0).
// stdout: "truth climb_here inuse_space=N" once at the top (N: what the
// climb held there), then "truth hold_here inuse_space=N", then "ready".
// 4 MiB is a jemalloc size class: usable size == requested size.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (4UL << 20)
#define MAX_BLOCKS 4096

static void* climbed[MAX_BLOCKS];
static void* held[MAX_BLOCKS];

static void pause_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

__attribute__((noinline, noclone)) size_t climb_here(size_t top_mib, long step_ms) {
  size_t n = top_mib * (1UL << 20) / BLOCK;
  for (size_t i = 0; i < n && i < MAX_BLOCKS; i++) {
    climbed[i] = malloc(BLOCK);
    if (!climbed[i]) abort();
    memset(climbed[i], (int)(i & 0x7f) + 1, BLOCK);
    if (step_ms) pause_ms(step_ms);
  }
  return n;
}

__attribute__((noinline, noclone)) size_t hold_here(size_t hold_mib) {
  size_t n = hold_mib * (1UL << 20) / BLOCK;
  for (size_t i = 0; i < n && i < MAX_BLOCKS; i++) {
    held[i] = malloc(BLOCK);
    if (!held[i]) abort();
    memset(held[i], 0x33, BLOCK);
  }
  return n;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: climber TOP_MIB HOLD_MIB STEP_MS\n");
    return 2;
  }
  size_t top = strtoul(argv[1], NULL, 10), hold = strtoul(argv[2], NULL, 10);
  long step = strtol(argv[3], NULL, 10);
  size_t n = climb_here(top, step);
  printf("truth climb_here inuse_space=%zu\n", n * BLOCK);
  fflush(stdout);
  pause_ms(200);
  for (size_t i = 0; i < n; i++) free(climbed[i]);
  size_t h = hold_here(hold);
  printf("truth hold_here inuse_space=%zu\nready\n", h * BLOCK);
  fflush(stdout);
  pause_ms(60000);
  return 0;
}
