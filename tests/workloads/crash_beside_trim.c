/* crash_beside_trim: a thread calls malloc_trim(0) (or mallinfo2) in a loop
 * over a fragmented heap, which holds glibc's arena lock most of the time,
 * while main faults. The stop must see that the thread is inside the
 * allocator (argv[1]: trim or info). */
#include <malloc.h>

#include "mallinfo2_compat.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int trim;

static void* spin(void* arg) {
  for (;;) {
    if (trim)
      malloc_trim(0);
    else
      (void)mallinfo2();
  }
  return arg;
}

int main(int argc, char** argv) {
  trim = argc > 1 && strcmp(argv[1], "trim") == 0;
  static void* keep[200000];
  for (int i = 0; i < 200000; ++i) keep[i] = malloc(4096 + (i % 7) * 16);
  for (int i = 0; i < 200000; i += 2) free(keep[i]);
  pthread_t t;
  pthread_create(&t, 0, spin, 0);
  usleep(300000);
  *(volatile int*)0 = 1;
  return 0;
}
