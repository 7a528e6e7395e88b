/* early_alloc: a library whose constructor allocates before a preloaded
 * library's constructor runs (a program's DT_NEEDED libraries are
 * initialised first); the program frees the block later. */
#include <stdlib.h>
#include <string.h>

char* early_block;

__attribute__((constructor)) static void early(void) {
  early_block = malloc(4000);
  if (early_block) strcpy(early_block, "allocated in a constructor");
}
