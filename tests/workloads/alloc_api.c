// alloc_api: every C allocation entry point, each checked for its contract
// and freed with the matching function; then one 8 MiB block held through
// each entry point at its own named site (hold_<function>), freed by an
// atexit handler after the profile is taken.
// usage: alloc_api         stdout: "ok ..." lines, one "truth" line per held
//                          site, then "alloc_api: all ok"; exit 0.
// Any broken contract prints "FAIL ..." to stdout and exits 1.
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HELD (8UL << 20)

static int failures;
// Sizes the compiler cannot see, so it neither warns about nor folds the
// deliberately impossible requests.
static volatile size_t huge = SIZE_MAX / 2;

static void expect(int ok, const char* what) {
  printf("%s %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) failures++;
}

static int aligned(const void* p, size_t a) { return ((uintptr_t)p % a) == 0; }

static int filled(const unsigned char* p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

static void check_contracts(void) {
  long page = sysconf(_SC_PAGESIZE);

  char* p = malloc(100);
  expect(p != NULL && malloc_usable_size(p) >= 100, "malloc + malloc_usable_size");
  memset(p, 1, 100);
  free(p);
  free(NULL);
  expect(1, "free(NULL)");
  p = malloc(0);
  free(p);
  expect(1, "malloc(0) + free");

  errno = 0;
  p = malloc(huge);
  expect(p == NULL && errno == ENOMEM, "malloc(huge) fails with ENOMEM");

  unsigned char* c = calloc(1000, 100);
  expect(c != NULL && filled(c, 100000, 0), "calloc zeroes");
  free(c);
  errno = 0;
  c = calloc(huge, 4);
  expect(c == NULL && errno == ENOMEM, "calloc overflow fails with ENOMEM");

  unsigned char* r = realloc(NULL, 64);
  memset(r, 9, 64);
  r = realloc(r, 1 << 20);
  expect(r != NULL && filled(r, 64, 9), "realloc grows and keeps contents");
  r = realloc(r, 16);
  expect(r != NULL && filled(r, 16, 9), "realloc shrinks and keeps contents");
  free(r);

  unsigned char* ra = reallocarray(NULL, 10, 10);
  memset(ra, 3, 100);
  ra = reallocarray(ra, 1000, 100);
  expect(ra != NULL && filled(ra, 100, 3), "reallocarray grows and keeps contents");
  errno = 0;
  void* bad = reallocarray(ra, huge, 4);
  expect(bad == NULL && errno == ENOMEM, "reallocarray overflow fails with ENOMEM");
  if (bad == NULL) free(ra);  // a failed reallocarray leaves ra allocated

  void* pm = NULL;
  int rc = posix_memalign(&pm, 4096, 10000);
  expect(rc == 0 && aligned(pm, 4096), "posix_memalign aligns");
  free(pm);
  pm = (void*)1;
  rc = posix_memalign(&pm, 3, 100);
  expect(rc == EINVAL, "posix_memalign rejects alignment 3 with EINVAL");

  void* aa = aligned_alloc(256, 4096);
  expect(aa != NULL && aligned(aa, 256), "aligned_alloc aligns");
  free(aa);

  void* ma = memalign(65536, 1000);
  expect(ma != NULL && aligned(ma, 65536), "memalign aligns");
  free(ma);

  void* va = valloc(1000);
  expect(va != NULL && aligned(va, (size_t)page), "valloc is page aligned");
  free(va);

  void* pv = pvalloc(1000);
  expect(pv != NULL && aligned(pv, (size_t)page) && malloc_usable_size(pv) >= (size_t)page,
         "pvalloc is page aligned and page sized");
  free(pv);

  char* s = strdup("strdup works");
  expect(s != NULL && strcmp(s, "strdup works") == 0, "strdup copies");
  free(s);
  s = strndup("strndup works", 7);
  expect(s != NULL && strcmp(s, "strndup") == 0, "strndup copies");
  free(s);

  char* as = NULL;
  int n = asprintf(&as, "%s-%d", "asprintf", 42);
  expect(n == 11 && strcmp(as, "asprintf-42") == 0, "asprintf (libc-internal malloc)");
  free(as);

  char* rp = realpath("/", NULL);
  expect(rp != NULL && strcmp(rp, "/") == 0, "realpath(NULL) (libc-internal malloc)");
  free(rp);

  FILE* f = open_memstream(&as, &(size_t){0});
  for (int i = 0; i < 10000; i++) fputs("0123456789", f);
  fclose(f);
  expect(strlen(as) == 100000, "open_memstream (libc-internal realloc)");
  free(as);
}

static void* held[16];
static int nheld;

static void keep(const char* site, void* p, size_t truth) {
  memset(p, 0x77, truth < HELD ? truth : HELD);
  held[nheld++] = p;
  printf("truth %s inuse_space=%zu\n", site, truth);
}

__attribute__((noinline, noclone)) void hold_malloc(void) {
  keep("hold_malloc", malloc(HELD), HELD);
}
__attribute__((noinline, noclone)) void hold_calloc(void) {
  keep("hold_calloc", calloc(HELD / 4096, 4096), HELD);
}
__attribute__((noinline, noclone)) void hold_realloc(void) {
  void* p = realloc(NULL, 4096);
  keep("hold_realloc", realloc(p, HELD), HELD);
}
__attribute__((noinline, noclone)) void hold_reallocarray(void) {
  void* p = reallocarray(NULL, 16, 256);
  keep("hold_reallocarray", reallocarray(p, HELD / 4096, 4096), HELD);
}
__attribute__((noinline, noclone)) void hold_posix_memalign(void) {
  void* p = NULL;
  if (posix_memalign(&p, 4096, HELD) != 0) abort();
  keep("hold_posix_memalign", p, HELD);
}
__attribute__((noinline, noclone)) void hold_aligned_alloc(void) {
  keep("hold_aligned_alloc", aligned_alloc(4096, HELD), HELD);
}
__attribute__((noinline, noclone)) void hold_memalign(void) {
  keep("hold_memalign", memalign(65536, HELD), HELD);
}
__attribute__((noinline, noclone)) void hold_valloc(void) {
  keep("hold_valloc", valloc(HELD), HELD);
}
__attribute__((noinline, noclone)) void hold_pvalloc(void) {
  keep("hold_pvalloc", pvalloc(HELD - 100), HELD);  // rounded up to whole pages
}
__attribute__((noinline, noclone)) void hold_strdup(const char* src) {
  keep("hold_strdup", strdup(src), HELD);
}

static char* make_source(void) {
  char* src = malloc(HELD);
  memset(src, 's', HELD - 1);
  src[HELD - 1] = 0;
  return src;
}

static void release(void) {
  for (int i = 0; i < nheld; i++) free(held[i]);
}

int main(void) {
  check_contracts();
  char* src = make_source();
  hold_malloc();
  hold_calloc();
  hold_realloc();
  hold_reallocarray();
  hold_posix_memalign();
  hold_aligned_alloc();
  hold_memalign();
  hold_valloc();
  hold_pvalloc();
  hold_strdup(src);
  free(src);
  atexit(release);
  if (failures) {
    printf("alloc_api: %d FAILED\n", failures);
    return 1;
  }
  printf("alloc_api: all ok\n");
  return 0;
}
