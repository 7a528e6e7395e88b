// signals_glibc: the calls of the signal API that glibc builds on its
// internal sigaction, which no interposer sees: each rebuilt as glibc builds
// it, on the interposed one, so that the program's view stays whole; see
// signals.h.
#include <errno.h>
#include <signal.h>
#include <string.h>

#include <atomic>

#include "own_signal.h"
#include "real.h"
#include "signals.h"

namespace signals {

namespace {
// glibc's _sigintr: the signals siginterrupt() made interrupting, which
// glibc's signal() installs without SA_RESTART.
std::atomic<uint64_t> g_sigintr;

bool in_range(int sig) { return sig > 0 && sig < NSIG; }
}  // namespace

namespace {
// A handler set the way one of glibc's simpler calls sets it.
sighandler_t set_simple(int sig, sighandler_t handler, bool mask_self, int flags) {
  if (handler == SIG_ERR || !in_range(sig)) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  if (mask_self) sigaddset(&sa.sa_mask, sig);
  sa.sa_flags = flags;
  if (on_sigaction(sig, &sa, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}
}  // namespace

sighandler_t on_bsd_signal(int sig, sighandler_t handler) {
  if (!active()) return real::signal()(sig, handler);
  // As glibc's signal(): the signal itself blocked in its handler, and
  // SA_RESTART unless siginterrupt() said otherwise.
  const bool interrupts = in_range(sig) && ((g_sigintr.load(std::memory_order_relaxed) >> (sig - 1)) & 1);
  return set_simple(sig, handler, true, interrupts ? 0 : SA_RESTART);
}

sighandler_t on_sysv_signal(int sig, sighandler_t handler) {
  if (!active()) return real::sysv_signal()(sig, handler);
  // As glibc's sysv_signal(): one-shot, not masked, interrupting.
  return set_simple(sig, handler, false, int((SA_RESETHAND | SA_NODEFER | 0x20000000 /* SA_INTERRUPT */) & ~SA_RESTART));
}

sighandler_t on_sigset(int sig, sighandler_t disp) {
  if (!active()) return real::sigset()(sig, disp);
  // As glibc's sigset(), through the interposed sigaction and sigprocmask so
  // that both views stay the program's.
  sigset_t set, oset;
  sigemptyset(&set);
  if (sigaddset(&set, sig) < 0) return SIG_ERR;
  struct sigaction act, oact;
  if (disp == SIG_HOLD) {
    if (sigprocmask(SIG_BLOCK, &set, &oset) < 0) return SIG_ERR;
    if (sigismember(&oset, sig)) return SIG_HOLD;
    if (on_sigaction(sig, nullptr, &oact) < 0) return SIG_ERR;
    return oact.sa_handler;
  }
  memset(&act, 0, sizeof act);
  act.sa_handler = disp;
  sigemptyset(&act.sa_mask);
  if (on_sigaction(sig, &act, &oact) < 0) return SIG_ERR;
  if (sigprocmask(SIG_UNBLOCK, &set, &oset) < 0) return SIG_ERR;
  return sigismember(&oset, sig) ? SIG_HOLD : oact.sa_handler;
}

int on_siginterrupt(int sig, int interrupt) {
  if (active() && in_range(sig) && sig <= 64) {
    uint64_t bit = uint64_t(1) << (sig - 1);
    if (interrupt)
      g_sigintr.fetch_or(bit, std::memory_order_relaxed);
    else
      g_sigintr.fetch_and(~bit, std::memory_order_relaxed);
  }
  // glibc's own reads the kernel's action (ours, where ours stands in) and
  // writes it back with SA_RESTART changed: the view keeps the flag.
  if (active() && sig == own_signal::number()) {
    struct sigaction v;
    if (own_signal::on_sigaction(nullptr, &v) != 0) return -1;
    if (interrupt)
      v.sa_flags &= ~SA_RESTART;
    else
      v.sa_flags |= SA_RESTART;
    return own_signal::on_sigaction(&v, nullptr);
  }
  return real::siginterrupt()(sig, interrupt);
}

int on_sigignore(int sig) {
  if (!active()) return real::sigignore()(sig);
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = SIG_IGN;
  sigemptyset(&act.sa_mask);
  return on_sigaction(sig, &act, nullptr);
}

}  // namespace signals
