// unwinds_itself: a program that walks its own stack with libunwind, in a
// loop (crash reporters, glog-style traces do), for about 1.5 s. The shim's
// sampler must never wait on libunwind's locks that this thread holds.
// stdout: "walks=N".
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdio.h>
#include <time.h>

__attribute__((noinline)) static int walk(int n) {
  if (n > 0) return walk(n - 1) + 1;
  unw_context_t ctx;
  unw_cursor_t cur;
  int frames = 0;
  unw_getcontext(&ctx);
  unw_init_local(&cur, &ctx);
  while (unw_step(&cur) > 0) frames++;
  return frames;
}

int main(void) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  long walks = 0;
  do {
    walk(10);
    walks++;
    clock_gettime(CLOCK_MONOTONIC, &b);
  } while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < 1500);
  printf("walks=%ld\n", walks > 0);
  return 0;
}
