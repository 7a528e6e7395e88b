// diff_mix: two runs of it are what `profshim diff` compares.
// usage: diff_mix cpu SECONDS [F_DIVISOR]
//   burns CPU in mix_f and mix_g, cycle after cycle, until the process has
//   used SECONDS of CPU time: a time-boxed job, whose absolute figures
//   follow the box and whose mix does not. mix_g does equal work each
//   cycle; mix_f does that work divided by F_DIVISOR (default 1), so 2 makes
//   mix_f twice as fast. Unit lengths come from a fixed pseudo-random
//   sequence so that the cycle never locks onto the sampling period.
// usage: diff_mix heap
//   holds a fixed heap until it returns: 24 MiB in 4 KiB blocks (hold_pages),
//   12 MiB in 1 KiB (hold_records), 6 MiB in 256 B (hold_small) and 32 MiB
//   in 64 KiB (hold_buffers); the same every run, so any difference between
//   two runs is the heap sampler's.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNIT 400000UL /* iterations, ~0.4 ms */

static volatile unsigned long sink;

__attribute__((noinline, noclone)) void mix_f(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL, sink = x;
}

__attribute__((noinline, noclone)) void mix_g(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) x = x * 2862933555777941757UL + 3037000493UL, sink = x;
}

static volatile sig_atomic_t boxed;

static void box_over(int sig) {
  (void)sig;
  boxed = 1;
}

// The box is a CPU-time timer, not a clock read in the loop: a system call
// per cycle took a share of its own, which a sampler's signal, delivered on
// the way back from the kernel, overstates.
static int cpu(double seconds, unsigned long divisor) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = box_over;
  sigaction(SIGUSR2, &sa, NULL);
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = SIGUSR2;
  timer_t t;
  struct itimerspec when = {{0, 0}, {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)}};
  if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &ev, &t) != 0 || timer_settime(t, 0, &when, NULL) != 0) {
    perror("diff_mix: timer");
    return 1;
  }
  unsigned long rng = 0x2545F4914F6CDD1DUL, cycles = 0;
  while (!boxed) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    unsigned long u = UNIT / 2 + rng % UNIT;
    mix_f(u / divisor);
    mix_g(u);
    cycles++;
  }
  printf("diff_mix cpu: %lu cycles\n", cycles);
  return 0;
}

static void* held[1 << 16];
static size_t nheld;

static void hold(size_t total, size_t block) {
  for (size_t done = 0; done < total && nheld < sizeof held / sizeof held[0]; done += block) {
    held[nheld] = malloc(block);
    memset(held[nheld++], 1, block);
  }
}

__attribute__((noinline, noclone)) void hold_pages(void) { hold(24u << 20, 4096); }
__attribute__((noinline, noclone)) void hold_records(void) { hold(12u << 20, 1024); }
__attribute__((noinline, noclone)) void hold_small(void) { hold(6u << 20, 256); }
__attribute__((noinline, noclone)) void hold_buffers(void) { hold(32u << 20, 65536); }

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "cpu") == 0)
    return cpu(atof(argv[2]), argc > 3 ? strtoul(argv[3], NULL, 10) : 1);
  if (argc == 2 && strcmp(argv[1], "heap") == 0) {
    hold_pages();
    hold_records();
    hold_small();
    hold_buffers();
    printf("diff_mix heap: %zu blocks\n", nheld);
    return 0;
  }
  fprintf(stderr, "usage: diff_mix cpu SECONDS [F_DIVISOR] | diff_mix heap\n");
  return 2;
}
