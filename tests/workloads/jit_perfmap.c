/* jit_perfmap: generates a counting loop into anonymous executable memory,
 * names it in /tmp/perf-PID.map as a JIT would ("JIT:counted_loop"), and
 * runs it for about argv[1] ms of CPU (default 400), then removes the map
 * unless argv[2] is "keep". x86-64 and arm64. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
/* loop: dec %rdi; jnz loop; ret */
static const unsigned char kCode[] = {0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};
#elif defined(__aarch64__)
/* loop: subs x0, x0, #1; b.ne loop; ret */
static const unsigned int kCode[] = {0xf1000400, 0x54ffffe1, 0xd65f03c0};
#else
#error "jit_perfmap: no code for this machine"
#endif

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  double want = argc > 1 ? atof(argv[1]) : 400;
  void* mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 2;
  memcpy(mem, kCode, sizeof kCode);
  if (mprotect(mem, 4096, PROT_READ | PROT_EXEC) != 0) return 3;
  __builtin___clear_cache((char*)mem, (char*)mem + sizeof kCode);
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
  FILE* f = fopen(path, "w");
  if (!f) return 4;
  fprintf(f, "%lx %zx JIT:counted_loop\n", (unsigned long)mem, sizeof kCode);
  fclose(f);
  long (*loop)(long) = (long (*)(long))mem;
  double start = cpu_ms();
  while (cpu_ms() - start < want) loop(2000000);
  if (!(argc > 2 && strcmp(argv[2], "keep") == 0)) unlink(path);
  printf("jit_perfmap: done\n");
  return 0;
}
