/* fill_limit: allocates 64 KiB blocks (each touched) until malloc fails,
 * prints how much it held, frees everything and exits 1: a program that
 * learns its memory limit the hard way and then ends in order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  static void* blocks[1 << 20];
  size_t n = 0;
  while (n < sizeof blocks / sizeof blocks[0]) {
    void* p = malloc(64 << 10);
    if (!p) break;
    memset(p, 1, 4096);
    blocks[n++] = p;
  }
  printf("held %zu MiB\n", n / 16);
  for (size_t i = 0; i < n; ++i) free(blocks[i]);
  return 1;
}
