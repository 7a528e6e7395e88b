// dl_cycles: a program that loads a plugin, calls it and unloads it, CYCLES
// times in a row (a plugin host, a test harness, a script engine's
// extension modules). Each dlclose goes through the shim's hook, which
// records what the profile needs to name the plugin's code once it is gone;
// that work runs on this thread and must not show in the profile as the
// program's own functions.
// usage: dl_cycles PLUGIN CYCLES WORK_US   (PLUGIN: plugins/cycle_plugin.c built)
// stdout: "truth cycles n=N unloaded=U cpu_ns=C" (cycles run, cycles after which
//         the plugin was really gone, CLOCK_PROCESS_CPUTIME_ID at the end).
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline, noclone)) int one_cycle(const char* path, long us, unsigned long* sum) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return -1;
  unsigned long (*work)(long) = (unsigned long (*)(long))dlsym(h, "cycle_work");
  if (!work) return -1;
  *sum += work(us);
  if (dlclose(h) != 0) return -1;
  void* again = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (again) dlclose(again);
  return again == NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: dl_cycles PLUGIN CYCLES WORK_US\n");
    return 2;
  }
  int n = atoi(argv[2]), unloaded = 0;
  long us = atol(argv[3]);
  unsigned long sum = 0;
  for (int i = 0; i < n; i++) {
    int r = one_cycle(argv[1], us, &sum);
    if (r < 0) {
      fprintf(stderr, "dl_cycles: %s\n", dlerror());
      return 1;
    }
    unloaded += r;
  }
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  printf("truth cycles n=%d unloaded=%d cpu_ns=%lld sum=%lu\n", n, unloaded,
         ts.tv_sec * 1000000000LL + ts.tv_nsec, sum & 1);
  return 0;
}
