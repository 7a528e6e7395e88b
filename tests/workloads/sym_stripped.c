// sym_stripped: burns ~0.4 s of CPU in an exported function and ~0.4 s in a
// static one placed right after it. The tests build it with -rdynamic (so
// the exported functions are in .dynsym) and strip it: the exported one must
// be named from .dynsym, the static one shown as an address with the
// executable's mapping, never named after its exported neighbour.
// usage: sym_stripped [seconds]   default 0.4 (each)
// stdout: one line with a checksum.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline, noclone)) unsigned long sym_exported_hot(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + 1442695040888963407UL; sink = x; }
  return x;
}

__attribute__((noinline, noclone)) static unsigned long sym_static_hot(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) { x = x * 2862933555777941757UL + 3037000493UL; sink = x; }
  return x;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.4;
  unsigned long sum = 0;
  double t0 = cpu_seconds();
  while (cpu_seconds() - t0 < seconds) sum += sym_exported_hot(1000000);
  t0 = cpu_seconds();
  while (cpu_seconds() - t0 < seconds) sum += sym_static_hot(1000000);
  printf("sym_stripped: checksum=%016lx\n", sum);
  return 0;
}
