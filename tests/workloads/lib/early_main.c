/* early_main: frees what early_alloc's constructor allocated, reallocs a
 * second such block, then (while argv[1] counts down) execs itself with the
 * heap profile switched the other way (PROFILE_HEAP_SAMPLE 0 <-> 65536), so
 * consecutive images make opposite allocator choices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char* early_block;

int main(int argc, char** argv) {
  if (!early_block || strcmp(early_block, "allocated in a constructor") != 0) return 3;
  char* grown = realloc(early_block, 100000);
  if (!grown || strcmp(grown, "allocated in a constructor") != 0) return 4;
  free(grown);
  int left = argc > 1 ? atoi(argv[1]) : 0;
  printf("image %d: ok\n", left);
  fflush(stdout);
  if (left <= 0) return 0;
  const char* now = getenv("PROFILE_HEAP_SAMPLE");
  setenv("PROFILE_HEAP_SAMPLE", now && strcmp(now, "0") == 0 ? "65536" : "0", 1);
  char n[16];
  snprintf(n, sizeof n, "%d", left - 1);
  execl("/proc/self/exe", argv[0], n, (char*)0);
  perror("execl");
  return 5;
}
