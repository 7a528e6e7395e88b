// climb: a heap that climbs, as a service's does, for what the heap-peak
// file costs (tests/bench/bench.py, micro "climb"). Allocates blocks of
// 4 KiB to 64 KiB (a size drawn each time), writes each and sums it, until
// MIB mebibytes are held, then frees them all. Under the shim its heap
// passes PROFILE_PEAK_FLOOR and grows past each peak by 10% again and
// again: the worker dumps and writes heap-peak files while it climbs.
//
// usage: climb FD [MIB]   (default 1024)
// FD: "loop_s S cpu_s C\n", the loop's wall time (CLOCK_MONOTONIC) and the
// process's CPU over it (every thread's, the shim's worker included).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define MAX_BLOCKS (1 << 20)
static void* blocks[MAX_BLOCKS];

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: climb FD [MIB]\n");
    return 2;
  }
  int fd = atoi(argv[1]);
  size_t target = (size_t)(argc > 2 ? atol(argv[2]) : 1024) << 20, held = 0, n = 0;
  unsigned long seed = 12345, sum = 0;
  double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
  while (held < target && n < MAX_BLOCKS) {
    seed = seed * 6364136223846793005ul + 1442695040888963407ul;
    size_t size = (size_t)4096 << ((seed >> 33) % 5);  // 4 KiB .. 64 KiB
    unsigned char* p = malloc(size);
    if (!p) abort();
    memset(p, (int)(n & 0xff), size);
    for (size_t i = 0; i < size; i += 64) sum += p[i];
    blocks[n++] = p;
    held += size;
  }
  for (size_t i = 0; i < n; i++) free(blocks[i]);
  double t1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_PROCESS_CPUTIME_ID);
  dprintf(fd, "loop_s %.6f cpu_s %.6f\n", t1 - t0, c1 - c0);
  return sum == 42 ? 1 : 0;
}
