// sym_jit: runs generated code (x86-64) from anonymous executable memory for
// ~0.5 s of CPU. Such code has no file and no symbol: the profile must show
// its addresses with their (anonymous) mapping and no function name, never
// the name of some function nearby. (The unwinder may skip run_jit, the
// generated code's caller: that code has no CFI and keeps no frame.)
// usage: sym_jit [seconds]   default 0.5
// stdout: "jit=LO-HI" (the generated code's range), a checksum line.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// mov ecx, 100000; 1: dec ecx; jnz 1b; ret
static const unsigned char kLoop[] = {0xb9, 0xa0, 0x86, 0x01, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xc3};

__attribute__((noinline, noclone)) unsigned long run_jit(void (*fn)(void), double seconds) {
  double t0 = cpu_seconds();
  unsigned long calls = 0;
  while (cpu_seconds() - t0 < seconds) {
    for (int i = 0; i < 100; i++) fn();
    calls += 100;
  }
  return calls;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.5;
  long page = sysconf(_SC_PAGESIZE);
  unsigned char* m = mmap(NULL, (size_t)page * 4, PROT_READ | PROT_WRITE | PROT_EXEC,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    perror("sym_jit: mmap");
    return 2;
  }
  unsigned char* code = m + page + 256;
  memcpy(code, kLoop, sizeof kLoop);
  __builtin___clear_cache((char*)code, (char*)code + sizeof kLoop);
  printf("jit=%#lx-%#lx\n", (unsigned long)(uintptr_t)code, (unsigned long)(uintptr_t)code + sizeof kLoop);
  printf("sym_jit: calls=%lu\n", run_jit((void (*)(void))code, seconds));
  return 0;
}
