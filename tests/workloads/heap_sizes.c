// heap_sizes: blocks whose requested sizes are not jemalloc size classes,
// held to the stop:
//   hold_100mib   one malloc(100 MiB)    (jemalloc serves 112 MiB)
//   hold_100b     1000 x malloc(100)     (112 B each)
// The heap profile counts what jemalloc serves (docs/DESIGN.md, "The heap
// profile's numbers"); the truth lines give both the requested size and
// malloc_usable_size, jemalloc's own word for what it served.
// usage: heap_sizes [seconds]   sleeps that long before returning (default 0)
// stdout: "truth SITE requested=... usable=... count=..." per site.
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BIG (100UL << 20)
#define SMALL 100
#define SMALL_N 1000

void* big;  // not static: the compiler must keep the allocations
void* small[SMALL_N];

__attribute__((noinline, noclone)) void hold_100mib(void) {
  big = malloc(BIG);
  memset(big, 1, 4096);
}

__attribute__((noinline, noclone)) void hold_100b(void) {
  for (int i = 0; i < SMALL_N; i++) {
    small[i] = malloc(SMALL);
    memset(small[i], 2, SMALL);
  }
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0;
  hold_100mib();
  hold_100b();
  if (!big || !small[SMALL_N - 1]) return 1;
  printf("truth hold_100mib requested=%lu usable=%zu count=1\n", BIG, malloc_usable_size(big));
  printf("truth hold_100b requested=%d usable=%zu count=%d\n", SMALL, malloc_usable_size(small[0]), SMALL_N);
  fflush(stdout);
  struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
  nanosleep(&ts, NULL);
  return 0;
}
