// handler_jump: the entry the kernel calls where the shim routes a program's
// handler (see signals.cc, "routed"). It asks profshim_route_handler what to
// run and jumps there with the kernel's own arguments and return address, so
// the program's handler runs as the kernel would have called it: a
// backtrace() from it finds the signal frame right above it, with no frame
// of the shim's between (glibc's execinfo, a crash reporter's unwind).
#include <signal.h>

extern "C" void* profshim_route_handler(int sig, siginfo_t* si, void* uc);

// In the section of the calls that hold nothing (stackwalk.cc): a signal
// that lands while this runs finds no lock of the shim's held.
#if defined(__x86_64__)
__asm__(R"(
  .pushsection profshim_sigcall,"ax",@progbits
  .globl profshim_program_handler
  .hidden profshim_program_handler
  .type profshim_program_handler,@function
profshim_program_handler:
  .cfi_startproc
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  pushq %rdx
  .cfi_adjust_cfa_offset 8
  call profshim_route_handler
  popq %rdx
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  testq %rax, %rax
  jz 1f
  jmp *%rax
1:
  ret
  .cfi_endproc
  .size profshim_program_handler, .-profshim_program_handler
  .popsection
)");
#else
#error "profshim_program_handler: only x86_64 is supported"
#endif
