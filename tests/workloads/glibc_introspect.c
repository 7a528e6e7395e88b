// glibc_introspect: a program that watches its own memory through glibc's
// interfaces. Holds a known amount (48 MiB in 256 KiB blocks, 8 MiB in 64 B
// blocks), then reports what glibc's introspection says about it, then
// frees 256 MiB of 64 KiB blocks and trims.
// stdout, one "key=value ..." line each:
//   held bytes=N
//   mallinfo2 arena= ordblks= smblks= hblks= hblkhd= usmblks= fsmblks= uordblks= fordblks= keepcost=
//   mallinfo uordblks=N hblkhd=N          (the int version)
//   mallopt M_MXFAST(64)=R ...             (glibc's return for each option)
//   trim rss_freed=N rss_trimmed=N rc=R    (RSS bytes after the free, after malloc_trim(0))
// malloc_info's XML goes to ./malloc_info.xml, malloc_stats to stderr.
#include <malloc.h>

#include "mallinfo2_compat.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG (256UL << 10)
#define NBIG 192
#define SMALL 64UL
#define NSMALL 131072
#define TRIM_BLOCK (64UL << 10)
#define NTRIM 4096

static void* big[NBIG];
static void* small[NSMALL];
static void* trim[NTRIM];

static size_t rss(void) {
  long pages = 0, resident = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2) abort();
  fclose(f);
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static void report_mallopt(void) {
  static const struct {
    const char* name;
    int param, value;
  } opts[] = {
      {"M_MXFAST(64)", M_MXFAST, 64},
      {"M_MXFAST(4096)", M_MXFAST, 4096},
      {"M_TRIM_THRESHOLD(1M)", M_TRIM_THRESHOLD, 1 << 20},
      {"M_TOP_PAD(64K)", M_TOP_PAD, 65536},
      {"M_MMAP_THRESHOLD(1M)", M_MMAP_THRESHOLD, 1 << 20},
      {"M_MMAP_THRESHOLD(1G)", M_MMAP_THRESHOLD, 1 << 30},
      {"M_MMAP_MAX(0)", M_MMAP_MAX, 0},
      {"M_CHECK_ACTION(3)", M_CHECK_ACTION, 3},
      {"M_PERTURB(0)", M_PERTURB, 0},
      {"M_ARENA_TEST(2)", M_ARENA_TEST, 2},
      {"M_ARENA_MAX(0)", M_ARENA_MAX, 0},
      {"M_ARENA_MAX(4)", M_ARENA_MAX, 4},
      {"unknown(12345)", 12345, 1},
  };
  printf("mallopt");
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    printf(" %s=%d", opts[i].name, mallopt(opts[i].param, opts[i].value));
  printf("\n");
}

int main(void) {
  size_t held = 0;
  for (int i = 0; i < NBIG; i++) {
    big[i] = malloc(BIG);
    memset(big[i], 1, BIG);
    held += BIG;
  }
  for (int i = 0; i < NSMALL; i++) {
    small[i] = malloc(SMALL);
    memset(small[i], 2, SMALL);
    held += SMALL;
  }
  printf("held bytes=%zu\n", held);
  struct mallinfo2 m = mallinfo2();
  printf("mallinfo2 arena=%zu ordblks=%zu smblks=%zu hblks=%zu hblkhd=%zu usmblks=%zu fsmblks=%zu "
         "uordblks=%zu fordblks=%zu keepcost=%zu\n",
         m.arena, m.ordblks, m.smblks, m.hblks, m.hblkhd, m.usmblks, m.fsmblks, m.uordblks, m.fordblks,
         m.keepcost);
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  struct mallinfo m1 = mallinfo();
  printf("mallinfo uordblks=%d hblkhd=%d\n", m1.uordblks, m1.hblkhd);
  FILE* xml = fopen("malloc_info.xml", "w");
  if (!xml || malloc_info(0, xml) != 0) abort();
  fclose(xml);
  printf("malloc_info(1)=%d\n", malloc_info(1, stdout));
  fflush(stdout);
  malloc_stats();
  report_mallopt();

  for (int i = 0; i < NTRIM; i++) {
    trim[i] = malloc(TRIM_BLOCK);
    memset(trim[i], 3, TRIM_BLOCK);
  }
  for (int i = 0; i < NTRIM; i++) free(trim[i]);
  size_t freed = rss();
  int rc = malloc_trim(0);
  printf("trim rss_freed=%zu rss_trimmed=%zu rc=%d\n", freed, rss(), rc);
  for (int i = 0; i < NBIG; i++) free(big[i]);
  for (int i = 0; i < NSMALL; i++) free(small[i]);
  return 0;
}
