// je_api: a program built for jemalloc (linked with -ljemalloc) using its
// own API, which the shim must serve from the same jemalloc as malloc.
// usage: je_api        contracts of mallocx/rallocx/xallocx/sallocx/nallocx/
//                      sdallocx/dallocx; malloc'd and mallocx'd pointers
//                      freed across families; then hold_mallocx allocates
//                      128 MiB in 64 KiB blocks through mallocx and frees a
//                      quarter with sdallocx and a quarter with free, holding
//                      64 MiB at the stop.
//        je_api prof   also writes the heap profiler's switches through
//                      mallctl (prof.active=false by name and by MIB,
//                      thread.prof.active=false, prof.reset (where opt.prof
//                      is on), prof.dump to
//                      ./dumped.heap) and prints what each returned, before
//                      hold_mallocx runs.
// stdout: "ok"/"FAIL" lines, "rc NAME=N" lines (prof), "read NAME=V" lines,
//         "truth hold_mallocx inuse_space=N", "stats allocated=N held=N",
//         then "je_api: all ok"; exit 1 on a broken contract.
// The held blocks are freed by an atexit handler (after the profile).
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jemalloc/jemalloc.h>

#define BLOCK (64UL << 10)
#define NBLOCKS 2048

static int failures;
static void* blocks[NBLOCKS];

static void expect(int ok, const char* what) {
  printf("%s %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) failures++;
}

static int filled(const unsigned char* p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

static void check_contracts(void) {
  unsigned char* p = mallocx(1000, MALLOCX_ZERO);
  expect(p && filled(p, 1000, 0), "mallocx MALLOCX_ZERO zeroes");
  expect(sallocx(p, 0) == nallocx(1000, 0) && sallocx(p, 0) >= 1000, "sallocx == nallocx");
  memset(p, 7, 1000);
  p = rallocx(p, 1 << 20, 0);
  expect(p && filled(p, 1000, 7), "rallocx grows and keeps contents");
  size_t got = xallocx(p, 1 << 20, 0, 0);
  expect(got >= (1 << 20), "xallocx in place keeps the size");
  sdallocx(p, 1 << 20, 0);
  void* a = mallocx(5000, MALLOCX_ALIGN(4096));
  expect(a && ((uintptr_t)a % 4096) == 0, "mallocx MALLOCX_ALIGN aligns");
  dallocx(a, 0);
  void* t = mallocx(100, MALLOCX_TCACHE_NONE);
  expect(t != NULL, "mallocx MALLOCX_TCACHE_NONE");
  dallocx(t, MALLOCX_TCACHE_NONE);

  // One heap: any family frees any other's pointer.
  for (int i = 0; i < 1000; i++) {
    size_t n = 16 + (size_t)i * 97;
    void* m = malloc(n);
    memset(m, 1, n);
    if (i % 3 == 0) sdallocx(m, n, 0);
    else if (i % 3 == 1) dallocx(m, 0);
    else free(rallocx(m, n * 2, 0));
    void* x = mallocx(n, 0);
    memset(x, 2, n);
    if (i % 2) free(x);
    else free(realloc(x, n * 3));
  }
  expect(1, "malloc/free and mallocx/dallocx/sdallocx cross each other's pointers");
  void* m = malloc(300);
  expect(malloc_usable_size(m) == sallocx(m, 0), "malloc_usable_size == sallocx of a malloc'd block");
  free(m);
}

static int write_bool(const char* name, int by_mib) {
  int off = 0;
  char v = (char)off;  // jemalloc's bool is one byte
  if (!by_mib) return mallctl(name, NULL, NULL, &v, 1);
  size_t mib[8], len = 8;
  int rc = mallctlnametomib(name, mib, &len);
  return rc ? rc : mallctlbymib(mib, len, NULL, NULL, &v, 1);
}

static void read_bool(const char* name) {
  char v = 0;
  size_t sz = 1;
  int rc = mallctl(name, &v, &sz, NULL, 0);
  printf("read %s=%s\n", name, rc ? "error" : v ? "true" : "false");
}

static void take_the_profiler(void) {
  printf("rc prof.active=%d\n", write_bool("prof.active", 0));
  printf("rc prof.active(mib)=%d\n", write_bool("prof.active", 1));
  printf("rc thread.prof.active=%d\n", write_bool("thread.prof.active", 0));
  printf("rc prof.thread_active_init=%d\n", write_bool("prof.thread_active_init", 0));
  size_t lg = 30;
  // jemalloc 5.2.1 (Debian 11) crashes in prof.reset when its profiler is
  // off (opt.prof false), where there is nothing to reset.
  char on = 0;
  size_t sz = 1;
  if (mallctl("opt.prof", &on, &sz, NULL, 0) == 0 && on)
    printf("rc prof.reset=%d\n", mallctl("prof.reset", NULL, NULL, &lg, sizeof lg));
  const char* path = "dumped.heap";
  printf("rc prof.dump=%d\n", mallctl("prof.dump", NULL, NULL, &path, sizeof path));
  printf("rc opt.prof=%d\n", write_bool("opt.prof", 0));
  read_bool("opt.prof");
  read_bool("prof.active");
  read_bool("thread.prof.active");
}

__attribute__((noinline, noclone)) void hold_mallocx(void) {
  for (int i = 0; i < NBLOCKS; i++) {
    blocks[i] = mallocx(BLOCK, i % 2 ? MALLOCX_ZERO : 0);
    memset(blocks[i], i & 0xff, BLOCK);
  }
  for (int i = 0; i < NBLOCKS; i += 4) {
    sdallocx(blocks[i], BLOCK, 0);
    free(blocks[i + 1]);
    blocks[i] = blocks[i + 1] = NULL;
  }
}

static void release(void) {
  for (int i = 0; i < NBLOCKS; i++) dallocx(blocks[i] ? blocks[i] : mallocx(1, 0), 0);
}

int main(int argc, char** argv) {
  check_contracts();
  if (argc > 1 && strcmp(argv[1], "prof") == 0) take_the_profiler();
  hold_mallocx();
  size_t held = 0;
  for (int i = 0; i < NBLOCKS; i++)
    if (blocks[i]) held += sallocx(blocks[i], 0);
  uint64_t epoch = 1;
  size_t sz = sizeof epoch;
  mallctl("epoch", &epoch, &sz, &epoch, sz);
  size_t allocated = 0;
  sz = sizeof allocated;
  mallctl("stats.allocated", &allocated, &sz, NULL, 0);
  printf("truth hold_mallocx inuse_space=%zu\n", held);
  printf("stats allocated=%zu held=%zu\n", allocated, held);
  atexit(release);
  if (failures) {
    printf("je_api: %d FAILED\n", failures);
    return 1;
  }
  printf("je_api: all ok\n");
  return 0;
}
