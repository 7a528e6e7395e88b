/* alloc_whose: prints what tells glibc's malloc from jemalloc's, for the
 * allocator-choice tests. glibc's malloc_usable_size(malloc(5000)) is 5000
 * (a chunk of 5008 less its header), jemalloc's is its 5120 size class;
 * glibc honours mallopt(M_PERTURB), filling a new block with the byte's
 * complement, which jemalloc never does; glibc's mallinfo2().arena is its
 * main heap (132 KiB here), jemalloc's mapped extents are MiBs. */
#include <malloc.h>

#include "mallinfo2_compat.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  void* p = malloc(5000);
  printf("usable %zu\n", malloc_usable_size(p));
  free(p);
  mallopt(M_PERTURB, 0x5a);
  unsigned char* q = malloc(256);
  int perturbed = 1;
  for (int i = 0; i < 256; ++i) perturbed &= q[i] == (0x5a ^ 0xff);
  printf("perturb %s\n", perturbed ? "yes" : "no");
  free(q);
  mallopt(M_PERTURB, 0);
  printf("arena_kib %zu\n", mallinfo2().arena >> 10);
  return 0;
}
