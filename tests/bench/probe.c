// probe: the stop-latency probe of the benchmark (tests/bench/bench.py).
//
// It does a little of what real programs do — burns CPU in two functions,
// keeps a few thousand heap blocks of assorted sizes live, touches a buffer —
// then reads CLOCK_MONOTONIC and writes that timestamp to file descriptor FD
// *right before* calling exit(). The harness records CLOCK_MONOTONIC when
// wait4() returns for the process (or for the wrapper that started it), so
// the difference is everything between the program's last exit call and its
// end: a profiler's stop (profshim's, or gperftools'/jemalloc's at-exit dumps,
// or a wrapper's post-processing), the program's own teardown, and the
// kernel's. Plain runs give the floor.
//
// usage: probe FD [MILLISECONDS_OF_CPU [LIVE_BLOCKS]]   defaults 300 ms, 20000 blocks
// stdout: one line with a checksum.  FD: "T <seconds>.<nanoseconds>\n".
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t probe_mix(uint64_t x, unsigned n) {
  for (unsigned i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

__attribute__((noinline)) static uint64_t probe_hash(const unsigned char* p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

struct node {
  struct node* next;
  size_t size;
};

__attribute__((noinline)) static struct node* probe_alloc(unsigned count) {
  struct node* head = NULL;
  uint64_t x = 42;
  for (unsigned i = 0; i < count; i++) {
    x = probe_mix(x, 1);
    size_t size = sizeof(struct node) + 16 + (size_t)(x >> 54);  // 32 .. ~1 KiB: ~10 MiB live
    struct node* n = malloc(size);
    if (!n) abort();
    memset(n, (int)i, size);
    n->size = size;
    n->next = head;
    head = n;
  }
  return head;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: probe FD [MILLISECONDS_OF_CPU [LIVE_BLOCKS]]\n");
    return 2;
  }
  int fd = atoi(argv[1]);
  double budget = (argc > 2 ? atof(argv[2]) : 300.0) / 1000.0;
  unsigned blocks = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 20000;

  struct node* live = probe_alloc(blocks);
  size_t buf_size = 4u << 20;
  unsigned char* buf = malloc(buf_size);
  if (!buf) abort();
  memset(buf, 7, buf_size);

  double t0 = cpu_now();
  uint64_t x = 1;
  while (cpu_now() - t0 < budget) {
    x = probe_mix(x, 200000);
    x = probe_hash(buf, 65536, x);
  }
  size_t held = 0;
  for (struct node* n = live; n; n = n->next) held += n->size;
  sink = x;
  printf("probe: blocks=%u held=%zu checksum=%016llx\n", blocks, held, (unsigned long long)x);
  fflush(stdout);

  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char line[64];
  int len = snprintf(line, sizeof line, "T %lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
  if (write(fd, line, (size_t)len) != len) return 3;
  exit(0);
}
