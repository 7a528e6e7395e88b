// inline_cpu: CPU time spent in a function that is always inlined
// (mix_inlined, always_inline beats -fno-inline) into outer_caller. The
// profile must show the inlined frame as its own line: mix_inlined, then
// outer_caller, in one location. ~0.6 s.
// stdout: one line with a checksum.
#include <stdio.h>

static volatile unsigned long sink;

static inline __attribute__((always_inline)) unsigned long mix_inlined(unsigned long x) {
  for (int i = 0; i < 1000; i++) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
  return x;
}

__attribute__((noinline, noclone)) unsigned long outer_caller(unsigned long rounds) {
  unsigned long x = sink;
  for (unsigned long r = 0; r < rounds; r++) x = mix_inlined(x);
  return x;
}

int main(void) {
  printf("inline_cpu: checksum=%016lx\n", outer_caller(600000));
  return 0;
}
