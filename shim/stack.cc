// stack: a fresh stack for the stop; see stack.h.
#include "stack.h"

#include <stdint.h>
#include <sys/mman.h>

// Switches to `top` (16-byte aligned), calls fn(arg) there, switches back.
// The CFI lets an unwinder (and gdb) walk from the new stack to the old.
extern "C" void profshim_call_on_stack(void* top, void (*fn)(void*), void* arg)
    __attribute__((visibility("hidden")));
#if defined(__x86_64__)
__asm__(R"(
  .text
  .globl profshim_call_on_stack
  .hidden profshim_call_on_stack
  .type profshim_call_on_stack,@function
profshim_call_on_stack:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  movq %rdi, %rsp
  movq %rdx, %rdi
  callq *%rsi
  movq %rbp, %rsp
  popq %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size profshim_call_on_stack, .-profshim_call_on_stack
)");
#else
#error "profshim_call_on_stack: only x86_64 is supported"
#endif

namespace stack {

bool run_on_fresh(size_t size, void (*fn)(void*), void* arg) {
  const size_t guard = 4096;
  void* base = mmap(nullptr, size + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
  if (base == MAP_FAILED) return false;
  mprotect(base, guard, PROT_NONE);  // an overflow faults instead of writing below
  // Headroom above the first frame: a callee may read its caller's
  // argument area (glibc's syscall() loads a sixth argument from 8(%rsp),
  // and fn may tail-call it).
  uintptr_t top = (reinterpret_cast<uintptr_t>(base) + guard + size - 256) & ~uintptr_t(15);
  profshim_call_on_stack(reinterpret_cast<void*>(top), fn, arg);
  munmap(base, size + guard);
  return true;
}

}  // namespace stack
