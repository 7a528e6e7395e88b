// sym_plugin: a plugin that tests/integration/test_symbols.py builds at run
// time (cc -shared -fPIC -g) for tests/workloads/sym_dlclose.c, which
// dlopen()s it, burns CPU in it, may keep memory it allocated, and
// dlclose()s it before the stop. Its hot loop is on the line marked
// SYM_PLUGIN_LOOP.
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned long sink;

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline, noclone)) unsigned long sym_plugin_spin(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + 1442695040888963407UL; sink = x; }  // SYM_PLUGIN_LOOP
  return x;
}

// Burns `seconds` of this process's CPU time in sym_plugin_spin.
unsigned long sym_plugin_burn(double seconds) {
  double t0 = cpu_seconds();
  unsigned long sum = 0;
  while (cpu_seconds() - t0 < seconds) sum += sym_plugin_spin(1000000);
  return sum;
}

// n blocks of 1 MiB, touched, for the caller to keep after the plugin is gone.
__attribute__((noinline)) void** sym_plugin_alloc(int n) {
  void** v = malloc(sizeof(void*) * (size_t)n);
  for (int i = 0; v && i < n; i++) {
    v[i] = malloc(1 << 20);
    if (v[i]) memset(v[i], 1, 1 << 20);
  }
  return v;
}
