// sym_libc: spends ~0.6 s of CPU inside libc's qsort (glibc's merge sort,
// msort.c, or its qsort.c in later versions), sorting arrays of ints with a
// trivial comparator, so that libc's frames, named from its separate debug
// file (Debian's libc6-dbg), carry file and line.
// usage: sym_libc [seconds]   default 0.6
// stdout: one line with a checksum.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 4096

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void* a, const void* b) {
  int x = *(const int*)a, y = *(const int*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.6;
  static int v[N];
  unsigned long rng = 0x2545F4914F6CDD1DUL, sum = 0;
  double t0 = cpu_seconds();
  while (cpu_seconds() - t0 < seconds) {
    for (int i = 0; i < N; i++) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      v[i] = (int)(rng >> 33);
    }
    qsort(v, N, sizeof v[0], cmp);
    sum += (unsigned long)v[N / 2];
  }
  printf("sym_libc: checksum=%016lx\n", sum);
  return 0;
}
