// exit_code: does a little CPU work (spin) and holds 8 MiB (hold_some), then
// calls exit(STATUS).
// usage: exit_code [STATUS [FILL_DIR]]   STATUS defaults to 3.
//   FILL_DIR: before exiting, write FILL_DIR/filler until the file system is
//   full (ENOSPC), so that the profiles cannot be written at the stop.
// stdout: what it did; stderr: one line.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile unsigned long sink;
char* held;  // not static: the compiler must keep the allocation

__attribute__((noinline, noclone)) void spin(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
}

__attribute__((noinline, noclone)) void hold_some(unsigned long n) {
  held = malloc(n);
  memset(held, 1, n);
}

static long fill(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/filler", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror("exit_code: open filler");
    exit(100);
  }
  static char chunk[4096];
  memset(chunk, 'f', sizeof chunk);
  long total = 0;
  for (;;) {
    ssize_t n = write(fd, chunk, sizeof chunk);
    if (n > 0) { total += n; continue; }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  // Fill the last partial page too, byte by byte.
  while (write(fd, chunk, 1) == 1) total++;
  if (errno != ENOSPC) {
    perror("exit_code: expected ENOSPC");
    exit(101);
  }
  close(fd);
  return total;
}

int main(int argc, char** argv) {
  int status = argc > 1 ? atoi(argv[1]) : 3;
  printf("exit_code: working\n");
  spin(300000000UL);
  hold_some(8UL << 20);
  if (argc > 2) printf("exit_code: filled %ld bytes\n", fill(argv[2]));
  printf("exit_code: exiting with %d\n", status);
  fprintf(stderr, "exit_code: stderr line\n");
  exit(status);
}
