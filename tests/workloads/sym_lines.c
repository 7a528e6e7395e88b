// sym_lines: burns ~0.6 s of CPU in one loop written on one source line (the
// line marked SYM_HOT_LOOP), so every instruction of the loop has that line
// and the profile's line for the hot loop can be checked exactly.
// usage: sym_lines [seconds]   default 0.6
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

__attribute__((noinline, noclone)) unsigned long sym_hot(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + 1442695040888963407UL; sink = x; }  // SYM_HOT_LOOP
  return x;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.6;
  double t0 = cpu_seconds();
  unsigned long sum = 0;
  while (cpu_seconds() - t0 < seconds) sum += sym_hot(1000000);
  printf("sym_lines: checksum=%016lx\n", sum);
  return 0;
}
