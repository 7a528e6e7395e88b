// wild_unwind: spins, for the given CPU time, in code whose unwind
// information is wrong the way libgcc_s's is for the few instructions where
// it installs a landing pad's context: it names as the return address a
// stack slot that holds a small integer (2, as in a core of that crash).
// An unwinder that believes it goes on from address 2; one that reads the
// code there to look for a signal trampoline faults.
// usage: wild_unwind [seconds]   default 0.5
// stdout: one line, the same in every run.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void spin_wild(unsigned long rounds);
__asm__(
    ".text\n"
    ".globl spin_wild\n"
    ".type spin_wild,@function\n"
    "spin_wild:\n"
    ".cfi_startproc\n"
    "  pushq %rbp\n"
    "  .cfi_def_cfa_offset 16\n"
    "  .cfi_offset %rbp, -16\n"
    "  movq %rsp, %rbp\n"
    "  .cfi_def_cfa_register %rbp\n"
    "  subq $16, %rsp\n"
    "  movq $2, (%rsp)\n"
    "  movq %rdi, %rcx\n"
    "  .cfi_def_cfa %rsp, 8\n"  // wrong from here to the loop's end
    "1:\n"
    "  decq %rcx\n"
    "  jnz 1b\n"
    "  .cfi_def_cfa %rbp, 16\n"
    "  leave\n"
    "  .cfi_def_cfa %rsp, 8\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size spin_wild, .-spin_wild\n");

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.5;
  double start = cpu_seconds();
  unsigned long calls = 0;
  while (cpu_seconds() - start < seconds) {
    spin_wild(1000000);
    ++calls;
  }
  printf("wild_unwind: done\n");
  return calls ? 0 : 1;
}
