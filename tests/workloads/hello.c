// hello: the smallest workload. Writes to stdout first thing with write(2),
// unbuffered, so an empty stdout proves main never ran. Then prints its
// arguments, allocates and frees a little, writes one stderr line and
// returns the status given as argv[1] (default 0). An argument
// "chdir=DIR" makes it chdir(DIR) before returning (as daemons do).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char* volatile last_block;  // the allocations below must really happen

int main(int argc, char** argv) {
  static const char first[] = "hello: main ran\n";
  if (write(1, first, sizeof first - 1) < 0) return 99;
  for (int i = 1; i < argc; i++) printf("hello: arg %d = %s\n", i, argv[i]);
  char* s = strdup("hello: heap works");
  char* buf = malloc(1 << 20);
  last_block = buf;
  memset(buf, 7, 1 << 20);
  printf("%s (%d)\n", s, last_block[12345]);
  free(buf);
  free(s);
  fprintf(stderr, "hello: stderr line\n");
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], "chdir=", 6) == 0 && chdir(argv[i] + 6) != 0) perror("hello: chdir");
  return argc > 1 ? atoi(argv[1]) : 0;
}
