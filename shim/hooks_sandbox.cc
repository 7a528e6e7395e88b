// hooks_sandbox: the two ways a C program puts a seccomp filter in force,
// prctl(PR_SET_SECCOMP) and syscall(SYS_seccomp) (glibc has no seccomp()
// wrapper; libseccomp uses syscall(), or prctl where the call is missing):
// sandbox.h evaluates the filter first, while every call is still allowed.
// landlock_restrict_self, which programs make through syscall() too
// (landlock.h). And the calls a program makes through syscall() that the
// shim otherwise sees through libc's wrappers: rt_sigaction, the
// descriptor calls that can close what the shim keeps (close, dup2, dup3,
// close_range), and exit_group (a stop).
//
// Both are passed on as raw system calls, as glibc's own wrappers are: the
// shim calls them too, from signal handlers, where no lookup of the next
// definition may run. syscall() is written in assembly so that every other
// number reaches the kernel exactly as glibc's does (a raw clone or vfork
// through syscall() behaves as without the shim: no frame of ours on the
// stack it shares).
#include <errno.h>
#include <linux/close_range.h>
// Older headers (Debian 11's kernel headers, 5.10) lack the flag; the
// kernel's value, as close_range(2) defines it.
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#include <linux/seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "export.h"
#include "glibc_compat.h"
#include "landlock.h"
#include "lifecycle.h"
#include "sandbox.h"
#include "signals.h"
#include "sys.h"

namespace {
long raw6(long nr, long a, long b, long c, long d, long e, long f) {
  long r;
#if defined(__x86_64__)
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(r)
                   : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
  r = x0;
#endif
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
  const int saved = errno;  // the call's own errno only
  sandbox::before_seccomp_call(unsigned(op), unsigned(flags), reinterpret_cast<const void*>(prog));
  errno = saved;
  return raw6(nr, op, flags, prog, d, e, f);
}

// Landlock's number is the same on x86-64 and aarch64; older headers
// (Debian 11's) lack it.
#define PROFSHIM_SYS_LANDLOCK_RESTRICT_SELF 446
#ifdef SYS_landlock_restrict_self
static_assert(SYS_landlock_restrict_self == PROFSHIM_SYS_LANDLOCK_RESTRICT_SELF, "landlock_restrict_self's number");
#endif

// syscall(SYS_landlock_restrict_self, ...) comes here: passed on first,
// since only once it is in force can the shim learn what it denies
// (landlock.h).
extern "C" __attribute__((visibility("hidden"))) long profshim_syscall_landlock(long nr, long a, long b, long c,
                                                                              long d, long e, long f) {
  const long r = raw6(nr, a, b, c, d, e, f);
  if (r == 0) landlock::after_restrict_self();
  return r;
}

namespace {
bool read_action(const void* src, void* dst, size_t n) {
  sandbox::OwnCalls own;
  return sys::read_own(src, dst, n);
}
bool write_action(void* dst, const void* src, size_t n) {
  sandbox::OwnCalls own;
  return sys::write_own(dst, src, n);
}
}  // namespace

// syscall(SYS_rt_sigaction, ...) comes here: a program that sets a handler
// with the kernel's own call through syscall() (Chromium's sandbox sets its
// SIGSYS handler so) goes through the shim's sigaction as through libc's,
// so that the shim still sees its signals first (a trap of the shim's own
// call, sandbox.h) and the program sees its own view. The kernel's struct
// for x86-64 and aarch64 (the same four fields); any other size, and
// glibc's own two signals, go through raw.
extern "C" __attribute__((visibility("hidden"))) long profshim_syscall_sigaction(long nr, long sig, long act,
                                                                               long old, long size, long e,
                                                                               long f) {
  struct KernelAction {
    void* handler;
    unsigned long flags;
    void* restorer;
    uint64_t mask;
  };
  if (size != 8 || !signals::active() || (sig >= 32 && sig < SIGRTMIN)) return raw6(nr, sig, act, old, size, e, f);
  const int saved = errno;  // kept where the call succeeds, as the kernel's
  KernelAction k;
  struct sigaction a, o;
  memset(&a, 0, sizeof a);
  memset(&o, 0, sizeof o);
  // The kernel's EFAULT for a bad pointer, not a fault of the shim's. The
  // copy's own calls are the shim's (sandbox.h), the action's the program's.
  // Where the copy is refused, the kernel takes the call as it is.
  if (act && !read_action(reinterpret_cast<const void*>(act), &k, sizeof k))
    return errno == EFAULT ? -1 : raw6(nr, sig, act, old, size, e, f);
  if (act) {
    a.sa_handler = reinterpret_cast<sighandler_t>(k.handler);
    a.sa_flags = int(k.flags);
    a.sa_restorer = reinterpret_cast<void (*)()>(k.restorer);
    memcpy(&a.sa_mask, &k.mask, sizeof k.mask);
  }
  // Its answer as it comes (a trap's handler may have made it up).
  if (int rc = signals::on_sigaction(int(sig), act ? &a : nullptr, old ? &o : nullptr)) return rc;
  if (old) {
    KernelAction ko;
    ko.handler = reinterpret_cast<void*>(o.sa_handler);
    ko.flags = unsigned(o.sa_flags);
    ko.restorer = reinterpret_cast<void*>(o.sa_restorer);
    memcpy(&ko.mask, &o.sa_mask, sizeof ko.mask);
    if (!write_action(reinterpret_cast<void*>(old), &ko, sizeof ko)) {
      if (errno == EFAULT) return -1;
      // Refused: the kernel's own query writes there first, or answers
      // EFAULT (only then is the memory known to take the view).
      if (raw6(nr, sig, 0, old, size, 0, 0) != 0) return -1;
      memcpy(reinterpret_cast<void*>(old), &ko, sizeof ko);
    }
  }
  errno = saved;
  return 0;
}

// syscall(SYS_close / dup2 / dup3 / close_range, ...) comes here: a
// descriptor the shim keeps (stderr's duplicate, the saved root) closed by
// the program through syscall() is let go, as through libc's wrappers
// (hooks_fd.cc).
extern "C" __attribute__((visibility("hidden"))) long profshim_syscall_fd(long nr, long a, long b, long c, long d,
                                                                        long e, long f) {
  bool closes = true;
  unsigned lo = unsigned(a), hi = unsigned(a);
#ifdef SYS_dup2  // aarch64 has dup3 only
  const bool dup = nr == SYS_dup2 || nr == SYS_dup3;
#else
  const bool dup = nr == SYS_dup3;
#endif
  if (dup) {
    closes = a != b;
    lo = hi = unsigned(b);
  } else if (nr == SYS_close_range) {
    closes = !(c & CLOSE_RANGE_CLOEXEC);
    hi = unsigned(b);
  }
  if (closes) {
    const int saved = errno;  // the call's own errno only
    lifecycle::before_close(lo, hi);
    errno = saved;
  }
  return raw6(nr, a, b, c, d, e, f);
}

// syscall(SYS_exit_group, status) comes here: a program that ends itself
// with the kernel's own call (neither exit nor _exit runs) stops as at
// _exit, before the process ends.
extern "C" __attribute__((visibility("hidden"))) long profshim_syscall_exit_group(long nr, long a, long b, long c,
                                                                                long d, long e, long f) {
  lifecycle::stop("exit_group");
  return raw6(nr, a, b, c, d, e, f);
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
  cmpq $)" "13" R"(, %rdi
  je profshim_syscall_sigaction
  cmpq $)" "3" R"(, %rdi
  je profshim_syscall_fd
  cmpq $)" "33" R"(, %rdi
  je profshim_syscall_fd
  cmpq $)" "292" R"(, %rdi
  je profshim_syscall_fd
  cmpq $)" "436" R"(, %rdi
  je profshim_syscall_fd
  cmpq $)" "446" R"(, %rdi
  je profshim_syscall_landlock
  cmpq $)" "231" R"(, %rdi
  je profshim_syscall_exit_group
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
static_assert(SYS_seccomp == 317 && SYS_rt_sigaction == 13 && SYS_close == 3 && SYS_dup2 == 33 && SYS_dup3 == 292 &&
                  SYS_close_range == 436 && SYS_exit_group == 231,
              "the assembly above compares with x86-64's numbers");
#elif defined(__aarch64__)
// glibc's syscall(): number in x0, six arguments in x1-x6; -4095..-1 is an
// error, returned as -1 with errno. The numbers compared are the headers'
// (aarch64 has no dup2: its libc's dup2 is dup3).
#define PROFSHIM_STR2(x) #x
#define PROFSHIM_STR(x) PROFSHIM_STR2(x)
__asm__(R"(
  .text
  .globl syscall
  .type syscall,%function
syscall:
  .cfi_startproc
  cmp x0, #)" PROFSHIM_STR(SYS_seccomp) R"(
  b.eq profshim_syscall_seccomp
  cmp x0, #)" PROFSHIM_STR(SYS_rt_sigaction) R"(
  b.eq profshim_syscall_sigaction
  cmp x0, #)" PROFSHIM_STR(SYS_close) R"(
  b.eq profshim_syscall_fd
  cmp x0, #)" PROFSHIM_STR(SYS_dup3) R"(
  b.eq profshim_syscall_fd
  cmp x0, #)" PROFSHIM_STR(SYS_close_range) R"(
  b.eq profshim_syscall_fd
  cmp x0, #)" PROFSHIM_STR(PROFSHIM_SYS_LANDLOCK_RESTRICT_SELF) R"(
  b.eq profshim_syscall_landlock
  cmp x0, #)" PROFSHIM_STR(SYS_exit_group) R"(
  b.eq profshim_syscall_exit_group
  mov x8, x0
  mov x0, x1
  mov x1, x2
  mov x2, x3
  mov x3, x4
  mov x4, x5
  mov x5, x6
  svc #0
  cmn x0, #4095
  b.cs 1f
  ret
1:
  neg x0, x0
  stp x29, x30, [sp, #-32]!
  .cfi_def_cfa_offset 32
  .cfi_offset x29, -32
  .cfi_offset x30, -24
  mov x29, sp
  str x0, [sp, #16]
  bl __errno_location
  ldr x1, [sp, #16]
  str w1, [x0]
  mov x0, #-1
  ldp x29, x30, [sp], #32
  .cfi_def_cfa_offset 0
  .cfi_restore x29
  .cfi_restore x30
  ret
  .cfi_endproc
  .size syscall, .-syscall
)");
#else
#error "hooks_sandbox: syscall() is only written for x86_64 and aarch64"
#endif

EXPORT int prctl(int option, ...) noexcept {
  va_list ap;
  va_start(ap, option);
  unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
  unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
  va_end(ap);
  if (option == PR_SET_SECCOMP) {
    const int saved = errno;  // the call's own errno only
    sandbox::before_prctl_seccomp(a2, reinterpret_cast<const void*>(a3));
    errno = saved;
  }
  return int(raw6(SYS_prctl, option, long(a2), long(a3), long(a4), long(a5), 0));
}
