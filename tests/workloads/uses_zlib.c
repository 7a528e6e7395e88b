// uses_zlib: a program that links zlib itself (the Makefile builds it with
// -lz) and burns ~0.3 s of CPU outside it. The shim needs zlib too; zlib is
// then the program's library as well, and must stay among its mappings
// though no sample lies in it.
// usage: uses_zlib [seconds]   default 0.3
// stdout: zlib's version and a checksum.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <zlib.h>

static volatile unsigned long sink;

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline, noclone)) unsigned long spin(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + 1; sink = x; }
  return x;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.3;
  double t0 = cpu_seconds();
  unsigned long sum = 0;
  while (cpu_seconds() - t0 < seconds) sum += spin(100000);
  printf("uses_zlib: zlib %s checksum=%016lx\n", zlibVersion(), sum);
  return 0;
}
