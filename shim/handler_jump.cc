// handler_jump: the entry the kernel calls where the shim routes a program's
// handler (see signals.cc, "routed"). It asks profshim_route_handler what to
// run and jumps there with the kernel's own arguments and return address, so
// the program's handler runs as the kernel would have called it: a
// backtrace() from it finds the signal frame right above it, with no frame
// of the shim's between (glibc's execinfo, a crash reporter's unwind).
//
// Where the route moved the kernel's frame (signals_onstack.cc: an
// SA_ONSTACK handler off the shim's alternate stack, back to the thread's
// own), the stack pointer and the frame's two pointers (siginfo, ucontext)
// move by as much: the handler's return then reaches sa_restorer at the
// moved frame's base, and rt_sigreturn reads the context there (the kernel
// takes the frame just below the stack pointer it finds).
#include <signal.h>

struct Routed {
  void* handler;  // rax
  long delta;     // rdx
};
extern "C" Routed profshim_route_handler(int sig, siginfo_t* si, void* uc, unsigned long frame);

// In the section of the calls that hold nothing (stackwalk.cc): a signal
// that lands while this runs finds no lock of the shim's held.
// The entry's CFA stays rsp + 8 throughout: after the move, rsp is the
// moved frame's base, whose first word is the same return address.
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
  leaq 24(%rsp), %rcx
  call profshim_route_handler
  movq %rdx, %rcx
  popq %rdx
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  testq %rax, %rax
  jz 1f
  addq %rcx, %rsp
  addq %rcx, %rsi
  addq %rcx, %rdx
  jmp *%rax
1:
  ret
  .cfi_endproc
  .size profshim_program_handler, .-profshim_program_handler
  .popsection
)");
#elif defined(__aarch64__)
// The kernel enters with x0-x2 the handler's arguments and x30 the
// sigreturn trampoline: they are kept in a frame record of our own across
// the call, then restored, so the program's handler starts with the
// registers, stack pointer and return address the kernel gave. The routed
// move is x86-64's only (signals_onstack.cc: onstack_routed routes nothing
// here and onstack_move returns 0; a port of it would apply the distance
// to sp, x1 and x2, and fix extra_context's datap): the distance, x1 of the
// answer, is ignored.
__asm__(R"(
  .pushsection profshim_sigcall,"ax",%progbits
  .globl profshim_program_handler
  .hidden profshim_program_handler
  .type profshim_program_handler,%function
profshim_program_handler:
  .cfi_startproc
  stp x29, x30, [sp, #-48]!
  .cfi_def_cfa_offset 48
  .cfi_offset x29, -48
  .cfi_offset x30, -40
  mov x29, sp
  stp x0, x1, [sp, #16]
  str x2, [sp, #32]
  add x3, sp, #48
  bl profshim_route_handler
  mov x16, x0
  ldp x0, x1, [sp, #16]
  ldr x2, [sp, #32]
  ldp x29, x30, [sp], #48
  .cfi_def_cfa_offset 0
  .cfi_restore x29
  .cfi_restore x30
  cbz x16, 1f
  br x16
1:
  ret
  .cfi_endproc
  .size profshim_program_handler, .-profshim_program_handler
  .popsection
)");
#else
#error "profshim_program_handler: only x86_64 and aarch64 are supported"
#endif
