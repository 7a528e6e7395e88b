// maps_after_threads: prints the files mapped into it (/proc/self/maps, one
// path a line) after running 8 threads that each allocate and free across
// jemalloc's size classes (heap-sample intervals drawn, tcaches made and
// destroyed), and after a stdio line, a qsort and a strtod: the first use of
// whatever a preloaded library could load lazily. With "nothreads" it starts
// no thread (the churn runs on the main thread).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* churn(void* arg) {
  size_t step = (size_t)arg;
  void* p[64];
  for (int round = 0; round < 50; round++) {
    for (int i = 0; i < 64; i++) p[i] = malloc((size_t)16 << ((i + step) % 16));
    for (int i = 0; i < 64; i++) free(p[i]);
  }
  return NULL;
}

static int cmp(const void* a, const void* b) { return *(const int*)a - *(const int*)b; }

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "nothreads") == 0) {
    for (size_t i = 0; i < 8; i++) churn((void*)i);
  } else {
    pthread_t t[8];
    for (size_t i = 0; i < 8; i++)
      if (pthread_create(&t[i], NULL, churn, (void*)i) != 0) return 2;
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
  }
  int v[4] = {3, 1, 2, 0};
  qsort(v, 4, sizeof v[0], cmp);
  fprintf(stderr, "maps_after_threads: %d %g\n", v[0], strtod("2.5", NULL));
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return 3;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    char* path = strchr(line, '/');
    if (path) fputs(path, stdout);
  }
  fclose(f);
  return 0;
}
