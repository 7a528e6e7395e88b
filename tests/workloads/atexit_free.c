// atexit_free: holds one 48 MiB buffer (allocated in hold_for_atexit) and
// registers a handler that frees it. The profile is taken before the handler
// runs, so the heap profile must still show the 48 MiB as in use.
// usage: atexit_free [return|exit|quick_exit]
//   return      return from main; the atexit handler frees the buffer
//   exit        exit(0) from a nested function; the atexit handler frees it
//   quick_exit  quick_exit(0); an at_quick_exit handler frees it
// stdout: "truth hold_for_atexit inuse_space=N", then, from the handler,
// "handler: freed" (proof that the program's own teardown still ran).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HELD (48UL << 20)

static char* buffer;

static void free_buffer(void) {
  free(buffer);
  buffer = NULL;
  printf("handler: freed\n");
  fflush(stdout);
}

__attribute__((noinline, noclone)) void hold_for_atexit(void) {
  buffer = malloc(HELD);
  memset(buffer, 0x42, HELD);
}

__attribute__((noinline, noclone)) void leave(const char* how) {
  fflush(stdout);
  if (strcmp(how, "exit") == 0) exit(0);
  if (strcmp(how, "quick_exit") == 0) quick_exit(0);
}

int main(int argc, char** argv) {
  const char* how = argc > 1 ? argv[1] : "return";
  hold_for_atexit();
  if (strcmp(how, "quick_exit") == 0)
    at_quick_exit(free_buffer);
  else
    atexit(free_buffer);
  printf("truth hold_for_atexit inuse_space=%lu\n", HELD);
  leave(how);
  return 0;
}
