// signals: fatal-signal handlers and sigaction bookkeeping; see signals.h.
#include "signals.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "lifecycle.h"
#include "real.h"
#include "sampler.h"

// The kernel's flag that glibc sets on every installation (asm/signal.h;
// glibc's <signal.h> does not expose it).
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

namespace signals {
namespace {

const int kFatal[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE,
                      SIGILL,  SIGPIPE, SIGALRM, SIGXCPU, SIGXFSZ, SIGUSR1, SIGUSR2};

enum Mode : int { kUnmanaged = 0, kOurs, kApp };

struct State {
  std::atomic<int> mode[NSIG];
  struct sigaction view[NSIG];  // what the program would see without the shim
  std::atomic<bool> lock;
  int sampling;  // 0: none (signal 0 is never a real one)
  std::atomic<bool> sampling_taken;
};
// Zero-initialised, with no dynamic initialiser: our constructor may run
// before this file's C++ initialisers would (scripts/check-exports fails
// the build if any shim object has one).
State g;

// Held with every signal blocked: a handler of the program's that calls
// signal() or sigaction() (the SysV re-arm idiom) must not find the lock held
// by the code it interrupted on the same thread.
struct Lock {
  sigset_t old;
  Lock() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (g.lock.exchange(true, std::memory_order_acquire)) {
    }
  }
  ~Lock() {
    g.lock.store(false, std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
};

bool synchronous_fault(int sig, const siginfo_t* si) {
  return si && si->si_code > 0 &&
         (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL);
}

void fatal_handler(int sig, siginfo_t* si, void*) {
  int saved = errno;
  lifecycle::stop_from_signal(sig);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  real::sigaction()(sig, &dfl, nullptr);
  // A fault re-executes its instruction on return and meets SIG_DFL there,
  // so the core shows the faulting frame. Anything sent (kill, raise,
  // abort) is sent again; it stays pending until this handler returns.
  if (!synchronous_fault(sig, si)) syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
  errno = saved;
}

int install_ours(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = fatal_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  return real::sigaction()(sig, &sa, nullptr);
}

bool is_default(const struct sigaction* a) {
  return !(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_DFL;
}

// What a query would have returned had the program's act been installed:
// glibc adds SA_RESTORER and its restorer to every installation, so take
// those from what is installed now (ours, installed through glibc too).
struct sigaction as_installed(int sig, const struct sigaction* act) {
  struct sigaction k, v = *act;
  if (real::sigaction()(sig, nullptr, &k) == 0 && (k.sa_flags & SA_RESTORER)) {
    v.sa_flags |= SA_RESTORER;
    v.sa_restorer = k.sa_restorer;
  }
  return v;
}

// The program takes the sampler's signal for itself: no further sample
// signal may reach its handler, so the timers go first and what is pending
// is discarded; the CPU profile keeps what it has (the summary says so).
int hand_over_sampling_signal(int sig, const struct sigaction* act) {
  sampler::stop();
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  real::sigaction()(sig, &ign, nullptr);
  g.sampling_taken.store(true);
  return real::sigaction()(sig, act, nullptr);
}

// Enough for the fatal handler (a futex wait) and for the sampling handler
// (libunwind keeps a cursor of about 1 KiB); touched only when used.
constexpr size_t kAltStack = 64 << 10;

}  // namespace

void* ensure_altstack() {
  stack_t cur;
  if (sigaltstack(nullptr, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return nullptr;
  void* p = mmap(nullptr, kAltStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  stack_t ss = {p, 0, kAltStack};
  if (sigaltstack(&ss, nullptr) != 0) {
    munmap(p, kAltStack);
    return nullptr;
  }
  return p;
}

void release_altstack(void* stack) {
  if (!stack) return;
  stack_t cur;
  // Only if it is still ours and not in use (the program may have set its own).
  if (sigaltstack(nullptr, &cur) == 0 && cur.ss_sp == stack && !(cur.ss_flags & SS_ONSTACK)) {
    stack_t off = {nullptr, SS_DISABLE, 0};
    sigaltstack(&off, nullptr);
    munmap(stack, kAltStack);
  }
}

void install(int sampling_signal) {
  for (int sig : kFatal) {
    struct sigaction cur;
    if (real::sigaction()(sig, nullptr, &cur) != 0 || !is_default(&cur)) continue;
    g.view[sig] = cur;
    if (install_ours(sig) == 0) g.mode[sig].store(kOurs);
  }
  if (sampling_signal > 0) {
    g.sampling = sampling_signal;  // stays 0 when there is no sampler
    memset(&g.view[sampling_signal], 0, sizeof(struct sigaction));
    g.view[sampling_signal].sa_handler = SIG_DFL;
    g.mode[sampling_signal].store(kOurs);
  }
}

int on_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  // A vfork child has its own dispositions but the parent's memory: our
  // bookkeeping there would change what the parent's queries report.
  if (sig <= 0 || sig >= NSIG || g.mode[sig].load() == kUnmanaged || lifecycle::in_vfork_child())
    return real::sigaction()(sig, act, old);
  Lock lock;
  struct sigaction before = g.view[sig];
  if (act) {
    bool keep_sampling = sig == g.sampling && g.mode[sig].load() == kOurs &&
                         (is_default(act) || act->sa_handler == SIG_IGN);
    if (keep_sampling) {
      // The sampler keeps its handler; the program's wish is only recorded.
    } else if (sig != g.sampling && is_default(act)) {
      if (install_ours(sig) != 0) return -1;
      g.mode[sig].store(kOurs);
    } else if (sig == g.sampling && g.mode[sig].load() == kOurs) {
      if (hand_over_sampling_signal(sig, act) != 0) return -1;
      g.mode[sig].store(kApp);
    } else {
      if (real::sigaction()(sig, act, nullptr) != 0) return -1;
      g.mode[sig].store(kApp);
    }
    g.view[sig] = as_installed(sig, act);
  }
  if (old) *old = before;
  return 0;
}

sighandler_t on_signal(int sig, sighandler_t handler) {
  if (sig <= 0 || sig >= NSIG || g.mode[sig].load() == kUnmanaged || lifecycle::in_vfork_child())
    return real::signal()(sig, handler);
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, sig);
  sa.sa_flags = SA_RESTART;
  if (on_sigaction(sig, &sa, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

bool sampling_signal_taken() { return g.sampling_taken.load(); }

void discard_pending_sampling_signal() {
  if (g.sampling <= 0 || g.mode[g.sampling].load() != kOurs) return;
  struct sigaction ign, ours;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  // Setting SIG_IGN discards every pending instance, for all threads.
  if (real::sigaction()(g.sampling, &ign, &ours) == 0) real::sigaction()(g.sampling, &ours, nullptr);
}

}  // namespace signals
