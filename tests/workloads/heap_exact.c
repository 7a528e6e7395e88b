// heap_exact: small allocations made first thing in main, for checking that
// the sampling rate is in force from the first allocation on. At
// PROFILE_HEAP_SAMPLE=1 every allocation is sampled, so every estimate must
// equal the truth exactly.
//   first_blocks  256 blocks of 1 KiB, held (the first allocations of main)
//   tiny_blocks   4096 blocks of 16 B, held
//   gone_blocks   512 blocks of 256 B, allocated and freed
// All sizes are jemalloc size classes (usable size == requested size).
// stdout: one truth line per site.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_N 256
#define FIRST_SIZE 1024
#define TINY_N 4096
#define TINY_SIZE 16
#define GONE_N 512
#define GONE_SIZE 256

void* first[FIRST_N];  // not static: the compiler must keep the allocations
void* tiny[TINY_N];
void* gone[GONE_N];

__attribute__((noinline, noclone)) void first_blocks(void) {
  for (int i = 0; i < FIRST_N; i++) {
    first[i] = malloc(FIRST_SIZE);
    memset(first[i], 1, FIRST_SIZE);
  }
}

__attribute__((noinline, noclone)) void tiny_blocks(void) {
  for (int i = 0; i < TINY_N; i++) {
    tiny[i] = malloc(TINY_SIZE);
    memset(tiny[i], 2, TINY_SIZE);
  }
}

__attribute__((noinline, noclone)) void gone_blocks(void) {
  for (int i = 0; i < GONE_N; i++) {
    gone[i] = malloc(GONE_SIZE);
    memset(gone[i], 3, GONE_SIZE);
  }
  for (int i = 0; i < GONE_N; i++) free(gone[i]);
}

int main(void) {
  first_blocks();
  tiny_blocks();
  gone_blocks();
  printf("truth first_blocks inuse_space=%d inuse_objects=%d alloc_space=%d alloc_objects=%d\n",
         FIRST_N * FIRST_SIZE, FIRST_N, FIRST_N * FIRST_SIZE, FIRST_N);
  printf("truth tiny_blocks inuse_space=%d inuse_objects=%d alloc_space=%d alloc_objects=%d\n",
         TINY_N * TINY_SIZE, TINY_N, TINY_N * TINY_SIZE, TINY_N);
  printf("truth gone_blocks inuse_space=0 inuse_objects=0 alloc_space=%d alloc_objects=%d\n",
         GONE_N * GONE_SIZE, GONE_N);
  return 0;
}
