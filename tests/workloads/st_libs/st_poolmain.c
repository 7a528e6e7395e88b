// st_poolmain: the program for st_poollib.so (compiled at run time). Finds
// the library's functions with dlsym(RTLD_DEFAULT), so the same source works
// when the library is linked in (DT_NEEDED) or preloaded (LD_PRELOAD).
// usage: st_poolmain [POOL_THREADS [SECONDS]]   default 2 threads, 0.8 s each
// stdout: "truth thread name=ctor-burn tid=T cpu_ns=C", one such line per
// "pool-K", and "truth process cpu_ns=C".
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2;
  double seconds = argc > 2 ? atof(argv[2]) : 0.8;
  void (*start)(int, double) = (void (*)(int, double))dlsym(RTLD_DEFAULT, "pool_start");
  void (*join)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "pool_join");
  void (*cjoin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "ctor_join");
  int (*tid)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "pool_tid");
  long long (*cpu)(int) = (long long (*)(int))dlsym(RTLD_DEFAULT, "pool_cpu_ns");
  if (!start || !join || !cjoin || !tid || !cpu) {
    fprintf(stderr, "st_poolmain: st_poollib.so is not loaded\n");
    return 3;
  }
  start(n, seconds);
  join();
  cjoin();
  printf("truth thread name=ctor-burn tid=%d cpu_ns=%lld\n", tid(-1), cpu(-1));
  for (int k = 0; k < n; k++) printf("truth thread name=pool-%d tid=%d cpu_ns=%lld\n", k, tid(k), cpu(k));
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  printf("truth process cpu_ns=%lld\n", ts.tv_sec * 1000000000LL + ts.tv_nsec);
  return 0;
}
