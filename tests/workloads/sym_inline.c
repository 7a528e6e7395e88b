// sym_inline: burns ~0.6 s of CPU in sym_mix, a function that is always
// inlined (always_inline beats -fno-inline and holds at any -O) into
// sym_outer. The profile must show sym_mix as a frame of its own, at the line
// marked SYM_INLINE_BODY, above sym_outer at the call's line, marked
// SYM_INLINE_CALL. The tests build it at -O2 too.
// usage: sym_inline [seconds]   default 0.6
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

static inline __attribute__((always_inline)) unsigned long sym_mix(unsigned long x, unsigned long n) {
  for (unsigned long i = 0; i < n; i++) { x = x * 2862933555777941757UL + 3037000493UL; sink = x; }  // SYM_INLINE_BODY
  return x;
}

__attribute__((noinline, noclone)) unsigned long sym_outer(unsigned long rounds) {
  unsigned long x = sink;
  for (unsigned long r = 0; r < rounds; r++) {
    x = sym_mix(x, 1000);  // SYM_INLINE_CALL
    __asm__ volatile("" ::: "memory");
  }
  return x;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.6;
  double t0 = cpu_seconds();
  unsigned long sum = 0;
  while (cpu_seconds() - t0 < seconds) sum += sym_outer(1000);
  printf("sym_inline: checksum=%016lx\n", sum);
  return 0;
}
