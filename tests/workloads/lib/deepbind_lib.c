/* deepbind_lib: a library the deepbind workload opens with RTLD_DEEPBIND,
 * as PHP opens its extensions: its malloc and free bind to libc's first
 * unless the loader is told otherwise. */
#include <stdlib.h>
#include <string.h>

void lib_free(void* p) { free(p); }

char* lib_strdup(const char* s) {
  char* p = malloc(strlen(s) + 1);
  if (p) strcpy(p, s);
  return p;
}
