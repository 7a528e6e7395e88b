// hooks_sandbox: the two ways a C program puts a seccomp filter in force,
// prctl(PR_SET_PR_SECCOMP) and syscall(SYS_seccomp) (glibc has no seccomp()
// wrapper; libseccomp uses syscall(), or prctl where the call is missing):
// sandbox.h evaluates the filter first, while every call is still allowed.
//
// Both are passed on as raw system calls, as glibc's own wrappers are: the
// shim calls them too, from signal handlers, where no lookup of the next
// definition may run. syscall() is written in assembly so that every other
// number reaches the kernel exactly as glibc's does (a raw clone or vfork
// through syscall() behaves as without the shim: no frame of ours on the
// stack it shares).
#include <errno.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "sandbox.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {
long raw6(long nr, long a, long b, long c, long d, long e, long f) {
  long r;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(r)
                   : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  if (r < 0 && r > -4096) {
    errno = int(-r);
    return -1;
  }
  return r;
}
}  // namespace

// syscall(SYS_seccomp, ...) comes here (from the assembly below).
extern "C" __attribute__((visibility("hidden"))) long profshim_syscall_seccomp(long nr, long op, long flags,
                                                                             long prog, long d, long e,
                                                                             long f) {
  sandbox::before_seccomp_call(unsigned(op), reinterpret_cast<const void*>(prog));
  return raw6(nr, op, flags, prog, d, e, f);
}

#if defined(__x86_64__)
// glibc's syscall(): number in rdi, six arguments in rsi, rdx, rcx, r8, r9
// and on the stack; -4095..-1 is an error, returned as -1 with errno.
__asm__(R"(
  .text
  .globl syscall
  .type syscall,@function
syscall:
  .cfi_startproc
  cmpq $)" "317" R"(, %rdi
  je profshim_syscall_seccomp
  movq %rdi, %rax
  movq %rsi, %rdi
  movq %rdx, %rsi
  movq %rcx, %rdx
  movq %r8, %r10
  movq %r9, %r8
  movq 8(%rsp), %r9
  syscall
  cmpq $-4095, %rax
  jae 1f
  ret
1:
  negq %rax
  pushq %rax
  .cfi_adjust_cfa_offset 8
  call __errno_location@PLT
  popq %rcx
  .cfi_adjust_cfa_offset -8
  movl %ecx, (%rax)
  movq $-1, %rax
  ret
  .cfi_endproc
  .size syscall, .-syscall
)");
static_assert(SYS_seccomp == 317, "the assembly above compares with x86-64's number");
#else
#error "hooks_sandbox: syscall() is only written for x86_64"
#endif

EXPORT int prctl(int option, ...) noexcept {
  va_list ap;
  va_start(ap, option);
  unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
  unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
  va_end(ap);
  if (option == PR_SET_SECCOMP) sandbox::before_prctl_seccomp(a2, reinterpret_cast<const void*>(a3));
  return int(raw6(SYS_prctl, option, long(a2), long(a3), long(a4), long(a5), 0));
}
