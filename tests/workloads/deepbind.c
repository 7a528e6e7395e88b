/* deepbind: allocates in the program, frees in a library opened with
 * RTLD_DEEPBIND, and the other way round (argv[1]: the library's path).
 * Under an allocator that only the program's lookup reaches, each free
 * meets a block of another heap. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  void (*lib_free)(void*) = (void (*)(void*))dlsym(h, "lib_free");
  char* (*lib_strdup)(const char*) = (char* (*)(const char*))dlsym(h, "lib_strdup");
  for (int i = 0; i < 1000; ++i) {
    char* mine = malloc(64 + i);
    memset(mine, 'a', 64 + i);
    lib_free(mine);
    char* theirs = lib_strdup("from the library");
    if (strcmp(theirs, "from the library") != 0) return 4;
    free(theirs);
  }
  printf("deepbind: ok\n");
  return 0;
}
