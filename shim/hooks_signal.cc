// hooks_signal: the signal API's wrappers. Dispositions go through
// signals.h (the program's view kept beside the kernel's action), masks and
// waits through sigmask.h and own_signal.h (the shim's signal is never
// blocked, never waited for by the program). Each passes straight through
// when inert and costs the one system call it costs without the shim.
#include <errno.h>
#include <signal.h>
#include <time.h>

#include "export.h"
#include "own_signal.h"
#include "real.h"
#include "sigmask.h"
#include "signals.h"
#include "sys.h"

// The masks and the waits hold nothing: a fatal signal that comes to a
// thread here (a pending one delivered as the mask call unblocks it, one
// that ends a wait) is stopped for at once, as the kernel would have ended
// the process there (stackwalk: a section it knows is safe).
#define SIGCALL __attribute__((section("profshim_sigcall"), noinline))

namespace {

using MaskCall = int (*)(int, const sigset_t*, sigset_t*);

SIGCALL int masked(int how, const sigset_t* set, sigset_t* old, MaskCall call) {
  if (!sigmask::ours() || sigmask::internal()) return call(how, set, old);
  sigmask::Change c;
  sigmask::prepare(how, set, &c);
  int rc = call(how, c.set, old);
  sigmask::commit(c, rc, old);
  return rc;
}

bool waits_for_ours(const sigset_t* set) {
  return set && sigmask::ours() && sigismember(set, sigmask::ours()) == 1;
}

// sigwaitinfo / sigtimedwait that never hand the program one of the shim's
// own signals (a CPU timer that fired while the thread entered the wait):
// those are dealt with and the wait goes on, for what remains of it.
SIGCALL int wait_info(const sigset_t* set, siginfo_t* info, const struct timespec* timeout) {
  siginfo_t local;
  siginfo_t* si = info ? info : &local;
  uint64_t deadline = 0;
  if (timeout) deadline = sys::now_ns(CLOCK_MONOTONIC) + uint64_t(timeout->tv_sec) * 1000000000ull + uint64_t(timeout->tv_nsec);
  struct timespec left;
  for (const struct timespec* t = timeout;;) {
    int r = timeout ? real::sigtimedwait()(set, si, t) : real::sigwaitinfo()(set, si);
    if (r < 0 || !own_signal::consume_if_ours(r, si)) return r;
    if (timeout) {
      uint64_t now = sys::now_ns(CLOCK_MONOTONIC);
      uint64_t rest = deadline > now ? deadline - now : 0;
      left = {time_t(rest / 1000000000ull), long(rest % 1000000000ull)};
      t = &left;
    }
  }
}

}  // namespace

// --- dispositions -------------------------------------------------------------

EXPORT int sigaltstack(const stack_t* ss, stack_t* old) noexcept { return signals::on_sigaltstack(ss, old); }

EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return signals::on_sigaction(sig, act, old);
}

EXPORT int __sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return signals::on_sigaction(sig, act, old);
}

EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept { return signals::on_bsd_signal(sig, handler); }

EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) noexcept {
  return signals::on_bsd_signal(sig, handler);
}

EXPORT sighandler_t ssignal(int sig, sighandler_t handler) noexcept { return signals::on_bsd_signal(sig, handler); }

EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) noexcept {
  return signals::on_sysv_signal(sig, handler);
}

EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler) noexcept {
  return signals::on_sysv_signal(sig, handler);
}

EXPORT sighandler_t sigset(int sig, sighandler_t disp) noexcept { return signals::on_sigset(sig, disp); }

EXPORT int sigignore(int sig) noexcept { return signals::on_sigignore(sig); }

EXPORT int siginterrupt(int sig, int interrupt) noexcept { return signals::on_siginterrupt(sig, interrupt); }

// --- masks --------------------------------------------------------------------

EXPORT SIGCALL int sigprocmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  return masked(how, set, old, real::sigprocmask());
}

EXPORT SIGCALL int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  return masked(how, set, old, real::pthread_sigmask());
}

// glibc implements these with its internal sigprocmask, which no interposer
// sees: through the interposed one, so the view stays the program's.
EXPORT SIGCALL int sighold(int sig) noexcept {
  if (!sigmask::ours()) return real::sighold()(sig);
  sigset_t one;
  if (sigemptyset(&one) < 0 || sigaddset(&one, sig) < 0) return -1;
  return sigprocmask(SIG_BLOCK, &one, nullptr);
}

EXPORT SIGCALL int sigrelse(int sig) noexcept {
  if (!sigmask::ours()) return real::sigrelse()(sig);
  sigset_t one;
  if (sigemptyset(&one) < 0 || sigaddset(&one, sig) < 0) return -1;
  return sigprocmask(SIG_UNBLOCK, &one, nullptr);
}

// --- waits with a mask of their own --------------------------------------------
// The mask passes unchanged (a waiting thread uses no CPU: no sample is
// lost); the view follows it for the call, so a kept signal the shim holds
// pending for the program is delivered or kept as the program asked.
// (ppoll, pselect and epoll_pwait are in hooks_wait.cc: the wait profile
// times them.)

EXPORT SIGCALL int sigsuspend(const sigset_t* mask) {
  sigmask::TempView view(mask);
  return real::sigsuspend()(view.pass());
}

// --- waits ----------------------------------------------------------------------

EXPORT SIGCALL int sigwaitinfo(const sigset_t* set, siginfo_t* info) {
  if (!waits_for_ours(set)) return real::sigwaitinfo()(set, info);
  return wait_info(set, info, nullptr);
}

EXPORT SIGCALL int sigtimedwait(const sigset_t* set, siginfo_t* info, const struct timespec* timeout) {
  if (!waits_for_ours(set)) return real::sigtimedwait()(set, info, timeout);
  return wait_info(set, info, timeout);
}

EXPORT SIGCALL int sigwait(const sigset_t* set, int* sig) {
  if (!waits_for_ours(set)) return real::sigwait()(set, sig);
  // As glibc's: waits again after EINTR; an error number, not -1.
  for (;;) {
    int r = wait_info(set, nullptr, nullptr);
    if (r > 0) {
      *sig = r;
      return 0;
    }
    if (errno != EINTR) return errno;
  }
}
