// signals_onstack: a program's SA_ONSTACK handlers run where the kernel
// would have run them without the shim; see signals.h.
//
// The shim gives every thread an alternate stack of 64 KiB (signals_altstack):
// the kernel then runs an SA_ONSTACK handler there on a thread where the
// program set none, where without the shim it runs on the thread's own stack
// (SA_ONSTACK means nothing with no alternate stack). A handler with frames
// over 64 KiB overran the shim's stack into whatever lay below it (a 256 KiB
// one: the process hung). Such handlers are routed through ours, and their
// frame is moved below the interrupted stack pointer's red zone, where the
// kernel would have put it. Only what the kernel itself would have done:
//  - where the kernel used the shim's stack at all (not the program's own, not
//    none, not nested on an alternate stack already in use);
//  - where the interrupted code ran on the thread's own stack, within bounds
//    the shim knows, with room for the frame: a stack overflow's SIGSEGV (the
//    interrupted stack pointer at its bottom) still runs on the alternate
//    stack, and so does a handler that interrupted a coroutine's or a JIT's
//    stack, whose bounds nothing here can tell;
//  - never a Go handler: Go's must run on the signal stack Go adopted (in a
//    Go program, the shim's), or Go reports a signal not on its stack.
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "go_runtime.h"
#include "sigmask.h"
#include "signals.h"
#include "stackwalk.h"

namespace signals {

namespace {
// The System V ABI's red zone, which the kernel skips below the interrupted
// stack pointer, and the xsave area's alignment, which the moved frame
// keeps (the kernel aligns that area to 64 and the frame below it to 16).
constexpr uintptr_t kRedZone = 128, kAlign = 64;

[[maybe_unused]] bool is_handler(const struct sigaction& a) { return a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN; }

[[maybe_unused]] bool go_handler(const struct sigaction& a) {
  return go_runtime::is_go() || go_runtime::in_go_object(reinterpret_cast<const void*>(a.sa_sigaction));
}
}  // namespace

bool onstack_routed(const struct sigaction* act) {
#if defined(__x86_64__)
  return (act->sa_flags & SA_ONSTACK) && is_handler(*act) && !go_handler(*act);
#else
  return false;  // the move is x86-64's (handler_jump.cc)
#endif
}

#if defined(__x86_64__)
__attribute__((section("profshim_sigcall"), noinline)) long onstack_move(const struct sigaction& prog, void* ucv,
                                                                         unsigned long frame) {
  auto* uc = static_cast<ucontext_t*>(ucv);
  if (!(prog.sa_flags & SA_ONSTACK)) return 0;
  // The kernel records the alternate stack's setting at delivery.
  const stack_t& alt = uc->uc_stack;
  const uintptr_t alo = uintptr_t(alt.ss_sp), ahi = alo + alt.ss_size;
  if ((alt.ss_flags & SS_DISABLE) || !is_shim_altstack(alt.ss_sp) || frame <= alo || frame >= ahi) return 0;
  // Interrupted on the alternate stack: the kernel nested the frame there
  // (the kernel's own test of it).
  const uintptr_t sp = uintptr_t(uc->uc_mcontext.gregs[REG_RSP]);
  if (sp > alo && sp - alo <= alt.ss_size) return 0;
  uintptr_t lo, hi;
  if (!stackwalk::thread_stack(&lo, &hi) || sp <= lo || sp > hi || sp - lo < kRedZone) return 0;
  // The frame: the kernel's rt_sigframe at the entry stack pointer
  // (sa_restorer's address, the ucontext, the siginfo) and the xsave area
  // above it, up to the alternate stack's top. The one absolute pointer in
  // it is uc_mcontext.fpregs, at that area.
  const uintptr_t fp = uintptr_t(uc->uc_mcontext.fpregs);
  if (fp && (fp < frame || fp >= ahi)) return 0;
  const uintptr_t size = ahi - frame;
  // A distance of whole 64s: every part keeps its alignment.
  const intptr_t delta = (intptr_t(sp - kRedZone) - intptr_t(ahi)) & ~intptr_t(kAlign - 1);
  const uintptr_t to = frame + uintptr_t(delta);
  if (to < lo || to + size > sp - kRedZone) return 0;
  if (go_handler(prog)) return 0;
  memmove(reinterpret_cast<void*>(to), reinterpret_cast<void*>(frame), size);
  auto* moved = reinterpret_cast<ucontext_t*>(uintptr_t(uc) + uintptr_t(delta));
  if (fp) moved->uc_mcontext.fpregs = reinterpret_cast<fpregset_t>(fp + uintptr_t(delta));
  // The shim's signal: the kernel blocked it for a handler on an alternate
  // stack (install_oneshot), which may be the program's 8 KiB. On the
  // thread's own stack the handler is one like any other, whose kernel mask
  // never holds it: a sample may land in it (on the alternate stack's top,
  // which nothing uses now). Not where the interrupted code had it blocked
  // (the shim's own sections that block every signal).
  const int ours = sigmask::ours();
  if (ours && sigismember(&uc->uc_sigmask, ours) != 1) {
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, ours);
    syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &one, nullptr, sizeof(uint64_t));
  }
  return long(delta);
}
#else
long onstack_move(const struct sigaction&, void*, unsigned long) { return 0; }
#endif

}  // namespace signals
