/* tc_held: a program linked with gperftools' tcmalloc (-ltcmalloc) that
 * holds 16 MiB from malloc and prints what tcmalloc says it holds
 * (generic.current_allocated_bytes), so a test can tell whose malloc
 * served it; with an argument, it then sleeps that many milliseconds
 * holding it. */
#include <gperftools/malloc_extension_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char** argv) {
  enum { kBlocks = 256, kSize = 64 << 10 };
  static char* held[kBlocks];
  for (int i = 0; i < kBlocks; ++i) {
    held[i] = malloc(kSize);
    if (!held[i]) return 1;
    memset(held[i], i, kSize);
  }
  size_t bytes = 0;
  if (!MallocExtension_GetNumericProperty("generic.current_allocated_bytes", &bytes)) return 2;
  printf("tcmalloc holds %zu MiB\n", bytes >> 20);
  if (argc > 1) {
    long ms = atol(argv[1]);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < kBlocks; ++i) free(held[i]);
  return 0;
}
