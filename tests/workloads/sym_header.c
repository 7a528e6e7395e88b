// sym_header: burns ~0.5 s of CPU in header_spin, defined in sym_header.h.
// tests/integration/test_names.py compiles it from its own directory as
// ./sym_header.c, so that DWARF names the header ./sym_header.h, relative to
// the compilation directory.
// usage: sym_header [seconds]   default 0.5
// stdout: one line with a checksum.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sym_header.h"

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.5;
  double t0 = cpu_seconds();
  unsigned long sum = 0;
  while (cpu_seconds() - t0 < seconds) sum += header_spin(100000);
  printf("sym_header: checksum=%016lx\n", sum);
  return 0;
}
