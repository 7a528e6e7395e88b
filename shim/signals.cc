// signals: fatal-signal handlers and the view of dispositions; see signals.h.
#include "signals.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>

#include "arch.h"
#include "go_runtime.h"
#include "lifecycle.h"
#include "own_signal.h"
#include "real.h"
#include "sandbox.h"
#include "sigmask.h"
#include "snapshot.h"
#include "sys.h"

// The kernel's flag that glibc sets on every installation (asm/signal.h;
// glibc's <signal.h> does not expose it).
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

namespace signals {
namespace {

// Every signal whose default action ends the process (signal(7): Term and
// Core), so that each such death is a stop. The real-time ones are added
// at install: their range is glibc's to say, and the shim's own is
// own_signal's.
const int kFatal[] = {SIGTERM, SIGINT,  SIGHUP,  SIGQUIT,   SIGABRT, SIGSEGV,   SIGBUS, SIGFPE,
                      SIGILL,  SIGPIPE, SIGALRM, SIGXCPU,   SIGXFSZ, SIGUSR1,   SIGUSR2, SIGTRAP,
                      SIGSYS,  SIGPROF, SIGVTALRM, SIGIO,   SIGPWR,  SIGSTKFLT};

// What the kernel's action cannot say, per signal. Where ours stands in for
// the program's SIG_DFL: the flags it asked for that ours needs otherwise
// (SA_SIGINFO, SA_ONSTACK) and whether its action carried SA_RESTORER (the
// kernel's initial default does not; glibc adds it to every sigaction). For
// any action: whether its sa_mask named the shim's signal.
// And whether it asked for SA_RESTART (ours for the snapshot signal adds
// it: a snapshot asked must not make the program's read() fail with EINTR).
enum : uint8_t { kInfo = 1, kOnstack = 2, kRestorer = 4, kMaskOurs = 8, kRestart = 16, kResetHand = 32 };

struct State {
  bool active;
  int snapshot_sig;
  bool managed[NSIG];  // SIG_DFL is served by our handler
  std::atomic<uint8_t> bits[NSIG];
  // A program's routed handler (route_through_us), as it asked for it;
  // read in the handler through the sequence number.
  struct sigaction oneshot[NSIG];
  std::atomic<uint32_t> oneshot_seq[NSIG];
};
State g;  // zero-initialised: no dynamic initialiser (DESIGN "Globals")

bool is_default(const struct sigaction* a) { return a->sa_handler == SIG_DFL; }

// The shim's signal in or out of a mask (an action's: the kernel's, or the
// view of it).
void mask_ours(sigset_t* mask, bool in) {
  if (in)
    sigaddset(mask, sigmask::ours());
  else
    sigdelset(mask, sigmask::ours());
}

void fatal_handler(int sig, siginfo_t* si, void* uc) { fatal(sig, si, uc); }
void snapshot_handler(int sig, siginfo_t* si, void* uc) { snapshot(sig, si, uc); }
bool is_ours(const struct sigaction& k) {
  return (k.sa_flags & SA_SIGINFO) && (k.sa_sigaction == fatal_handler || k.sa_sigaction == snapshot_handler);
}
}  // namespace
// handler_jump.cc: calls profshim_route_handler, then jumps to the program's.
// (C linkage: the name is the assembler's, whatever the namespace.)
extern "C" void profshim_program_handler(int sig, siginfo_t* si, void* uc);
namespace {
bool is_oneshot(const struct sigaction& k) {
  return (k.sa_flags & SA_SIGINFO) && k.sa_sigaction == profshim_program_handler;
}

// The signals the kernel's masks never hold (sigmask.h): a handler of the
// program's there must still meet the program's view of the mask.
bool kept_fault(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP || sig == SIGSYS;
}

// Ours runs before the program's handler: for a one-shot one on a managed
// signal (the kernel's reset would leave no handler of ours for the default:
// node's exit handlers re-raise the signal from one, and the process died
// with no profile), for any on a kept fault signal (its delivery must
// heed the view: sent while blocked it stays pending; a fault while blocked
// gets the default action, as the kernel forces it), and for an
// SA_ONSTACK one on any signal (onstack_routed: run on the stack it would
// run on without the shim's alternate stack).
bool route_through_us(int sig, const struct sigaction* act) {
  if (act->sa_handler == SIG_IGN || act->sa_handler == SIG_DFL) return false;
  if (onstack_routed(act)) return true;
  if (!g.managed[sig] || sig == g.snapshot_sig) return false;
  return (act->sa_flags & SA_RESETHAND) || kept_fault(sig);
}

// Bounded: a fork while another thread was writing leaves the child's
// sequence odd for good (that writer is gone); then what is there is read.
void read_oneshot(int sig, struct sigaction* out) {
  for (int tries = 0;; ++tries) {
    uint32_t s = g.oneshot_seq[sig].load(std::memory_order_acquire);
    if ((s & 1) && tries < 1000000) continue;
    memcpy(out, &g.oneshot[sig], sizeof *out);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g.oneshot_seq[sig].load(std::memory_order_relaxed) == s || tries >= 1000000) return;
  }
}

// Callers hold every signal blocked: a delivery on this thread cannot spin
// on a half-written action.
void write_oneshot(int sig, const struct sigaction* act) {
  g.oneshot_seq[sig].fetch_add(1, std::memory_order_acq_rel);
  memcpy(&g.oneshot[sig], act, sizeof *act);
  g.oneshot_seq[sig].fetch_add(1, std::memory_order_release);
}

uint8_t bits_for(const struct sigaction* act, bool standing_in) {
  uint8_t b = 0;
  int ours = sigmask::ours();
  if (ours && sigismember(&act->sa_mask, ours) == 1) b |= kMaskOurs;
  if (standing_in) {
    if (act->sa_flags & SA_SIGINFO) b |= kInfo;
    if (act->sa_flags & SA_ONSTACK) b |= kOnstack;
    if (act->sa_flags & SA_RESTART) b |= kRestart;
    if (act->sa_flags & SA_RESETHAND) b |= kResetHand;
    b |= kRestorer;  // the program's action goes through glibc, which adds it
  }
  return b;
}

// Ours in place of the program's SIG_DFL, with its flags and mask (the
// kernel keeps them for the next query); one system call.
int install_ours(int sig, const struct sigaction* prog, struct sigaction* old) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  bool snap = sig == g.snapshot_sig;
  sa.sa_sigaction = snap ? snapshot_handler : fatal_handler;
  // Never one-shot in the kernel: ours must stay (the view keeps the flag).
  // The alternate stack only for a stack overflow's SIGSEGV: a default
  // action never touches it, and the program may have freed it (Ruby does,
  // then re-raises SIGTERM at SIG_DFL).
  int onstack = sig == SIGSEGV ? SA_ONSTACK : 0;
  sa.sa_flags = (prog->sa_flags & ~(SA_RESTORER | SA_RESETHAND | SA_ONSTACK)) | SA_SIGINFO | onstack |
                (snap ? SA_RESTART : 0);
  memcpy(&sa.sa_mask, &prog->sa_mask, sizeof sa.sa_mask);
  if (int ours = sigmask::ours()) sigdelset(&sa.sa_mask, ours);
  return real::sigaction()(sig, &sa, old);
}

// What the program would have been told of the kernel's action k.
// prev: the program's one-shot action this call replaced (k's, then).
void view_of(int sig, const struct sigaction& k, uint8_t b, struct sigaction* out,
             const struct sigaction* prev = nullptr) {
  *out = k;
  if (is_ours(k)) {
    out->sa_handler = SIG_DFL;
    out->sa_flags = (k.sa_flags & ~(SA_SIGINFO | SA_ONSTACK | SA_RESTORER | SA_RESTART | SA_RESETHAND)) |
                    ((b & kInfo) ? SA_SIGINFO : 0) | ((b & kOnstack) ? SA_ONSTACK : 0) |
                    ((b & kRestorer) ? SA_RESTORER : 0) | ((b & kRestart) ? SA_RESTART : 0) |
                    ((b & kResetHand) ? SA_RESETHAND : 0);
    if (!(b & kRestorer)) out->sa_restorer = nullptr;
  } else if (is_oneshot(k)) {
    // The program's handler and SA_RESETHAND; the rest as the kernel keeps
    // it (its flags filtered, SIGKILL and SIGSTOP out of the mask).
    struct sigaction prog;
    if (prev)
      memcpy(&prog, prev, sizeof prog);
    else
      read_oneshot(sig, &prog);
    out->sa_handler = prog.sa_handler;  // or sa_sigaction: one union
    out->sa_flags = (k.sa_flags & ~SA_SIGINFO) | (prog.sa_flags & (SA_SIGINFO | SA_RESETHAND));
  }
  mask_ours(&out->sa_mask, b & kMaskOurs);
}

bool in_range(int sig) { return sig > 0 && sig < NSIG; }

// A routed handler: ours in the kernel, without SA_RESETHAND (ours does the
// reset).
int install_oneshot(int sig, const struct sigaction* prog, struct sigaction* old) {
  struct sigaction sa;
  memcpy(&sa, prog, sizeof sa);
  sa.sa_sigaction = profshim_program_handler;
  sa.sa_flags = (prog->sa_flags & ~(SA_RESTORER | SA_RESETHAND)) | SA_SIGINFO;
  // As for any handler (on_sigaction); onstack_move lifts it again where
  // the handler moves to the thread's own stack.
  if (sigmask::ours()) mask_ours(&sa.sa_mask, prog->sa_flags & SA_ONSTACK);
  sigset_t all, was;
  sigfillset(&all);
  sigmask::unfiltered(SIG_SETMASK, &all, &was);
  write_oneshot(sig, prog);
  int rc = real::sigaction()(sig, &sa, old);
  sigmask::unfiltered(SIG_SETMASK, &was, nullptr);
  return rc;
}

}  // namespace

bool synchronous_fault(int sig, const siginfo_t* si) {
  return si && si->si_code > 0 &&
         (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP || sig == SIGSYS);
}

// What a routed handler's delivery runs: the program's handler, and how
// far its frame moved (onstack_move), for handler_jump.cc to jump to with
// the stack pointer and the frame's pointers moved as far; or nothing.
// In the section of the calls that hold nothing (hooks_signal.cc): a
// program's handler that re-raises its signal from here is stopped for.
struct Routed {
  void* handler;
  long delta;
};
extern "C" __attribute__((section("profshim_sigcall"), noinline)) Routed profshim_route_handler(int sig, siginfo_t* si,
                                                                                                void* uc,
                                                                                                unsigned long frame) {
  int saved = errno;  // the program's handler sees the interrupted code's
  // A trap of the shim's own call is not the program's to see (sandbox.h).
  if (sandbox::absorb_trap(sig, si, uc)) return {nullptr, 0};
  struct sigaction prog, k, dfl;
  read_oneshot(sig, &prog);
  // Blocked in the program's view: what the kernel does with a blocked
  // signal. fatal() keeps a sent one pending; a fault gets the default
  // action (the kernel resets the handler and kills), after the stop.
  // Not in Go's code, nor in any thread of a Go program: Go unblocks the
  // faults on every thread it starts with its own system call, which the
  // view never sees (its threads are created with everything blocked), and
  // a nil dereference is its panic to recover from, not a death.
  if (kept_fault(sig) && sigmask::view_blocks(sig) && !go_runtime::is_go() &&
      !go_runtime::in_go_object(reinterpret_cast<const void*>(arch::pc(uc)))) {
    fatal(sig, si, uc);
    return {nullptr, 0};
  }
  // The kernel's reset: the handler goes, the flags (as they are now:
  // siginterrupt may have changed them) and mask stay. Not if another
  // thread has just installed something else. Ours stands in for SIG_DFL
  // where it is the shim's to serve.
  if ((prog.sa_flags & SA_RESETHAND) && real::sigaction()(sig, nullptr, &k) == 0 && is_oneshot(k)) {
    memcpy(&dfl, &prog, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    dfl.sa_flags = (k.sa_flags & ~(SA_SIGINFO | SA_RESTORER)) | (prog.sa_flags & SA_SIGINFO) | SA_RESETHAND;
    g.bits[sig].store(bits_for(&dfl, g.managed[sig]), std::memory_order_relaxed);
    if (g.managed[sig]) {
      install_ours(sig, &dfl, nullptr);
    } else {
      if (int ours = sigmask::ours()) sigdelset(&dfl.sa_mask, ours);
      real::sigaction()(sig, &dfl, nullptr);
    }
  }
  // Always the three arguments: the kernel passes them to any handler (a
  // one-argument one may read them from the registers all the same).
  if (prog.sa_handler == SIG_DFL || prog.sa_handler == SIG_IGN) {
    errno = saved;
    return {nullptr, 0};
  }
  long delta = onstack_move(prog, uc, frame);
  errno = saved;
  return {reinterpret_cast<void*>(prog.sa_sigaction), delta};
}

namespace {
// A trap (int3, a breakpoint, a single step, seccomp's SECCOMP_RET_TRAP)
// is raised after its instruction: returning does not raise it again.
bool trap(int sig, const siginfo_t* si) { return synchronous_fault(sig, si) && (sig == SIGTRAP || sig == SIGSYS); }
}  // namespace

void fatal(int sig, siginfo_t* si, void* uc) {
  if (sandbox::absorb_trap(sig, si, uc)) return;  // errno: the answer ENOSYS is for the call, not here
  int saved = errno;
  sigmask::Internal inside;
  // A fault signal sent (kill, raise) to a thread whose mask the program
  // has blocking it: the kernel's mask does not have it (sigmask.h), so it
  // is kept pending and blocked here, as it would have been.
  if (!synchronous_fault(sig, si) && sigmask::view_blocks(sig) && !lifecycle::retry_forced(sig)) {
    sigaddset(&static_cast<ucontext_t*>(uc)->uc_sigmask, sig);
    syscall(SYS_rt_tgsigqueueinfo, syscall(SYS_getpid), sys::gettid(), sig, si);
    errno = saved;
    return;
  }
  if (lifecycle::stop_on_fatal(sig, si, uc)) {  // deferred: the signal comes again shortly
    errno = saved;
    return;
  }
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  real::sigaction()(sig, &dfl, nullptr);
  // A fault re-executes its instruction on return and meets SIG_DFL there,
  // so the core shows the faulting frame. Anything sent (kill, raise,
  // abort) is sent again; it stays pending until this handler returns. A
  // trap is queued again as the kernel gave it (its si_code and fields are
  // in the core), unblocked on return as the kernel forces it.
  if (trap(sig, si)) {
    sigdelset(&static_cast<ucontext_t*>(uc)->uc_sigmask, sig);
    syscall(SYS_rt_tgsigqueueinfo, syscall(SYS_getpid), sys::gettid(), sig, si);
  } else if (!synchronous_fault(sig, si)) {
    syscall(SYS_tgkill, syscall(SYS_getpid), sys::gettid(), sig);
  }
  errno = saved;
}

bool serves_default(int sig) {
  struct sigaction k;
  return in_range(sig) && real::sigaction()(sig, nullptr, &k) == 0 && is_ours(k) && k.sa_sigaction == fatal_handler;
}

void snapshot(int sig, siginfo_t* si, void* uc) {
  int saved = errno;
  snapshot::on_signal();
  errno = saved;
}

bool install(int snapshot_sig) {
  g.snapshot_sig = snapshot_sig;
  int managed[NSIG], n = 0;
  for (int sig : kFatal) managed[n++] = sig;
  for (int sig = SIGRTMIN; sig <= SIGRTMAX && n < NSIG; ++sig)
    if (sig != own_signal::number()) managed[n++] = sig;
  bool fatal_too = false;
  for (int i = 0; i < n; ++i) fatal_too = fatal_too || managed[i] == snapshot_sig;
  if (snapshot_sig && !fatal_too && n < NSIG) managed[n++] = snapshot_sig;
  bool snapshot_in_place = false;
  for (int i = 0; i < n; ++i) {
    int sig = managed[i];
    g.managed[sig] = true;
    struct sigaction cur;
    memset(&cur, 0, sizeof cur);
    if (real::sigaction()(sig, nullptr, &cur) != 0 || !is_default(&cur)) continue;
    snapshot_in_place = snapshot_in_place || sig == snapshot_sig;
    uint8_t b = bits_for(&cur, true);
    if (!(cur.sa_flags & SA_RESTORER)) b &= uint8_t(~kRestorer);  // the kernel's initial default
    g.bits[sig].store(b);
    install_ours(sig, &cur, nullptr);
  }
  g.active = true;
  return snapshot_in_place;
}

int on_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (!g.active || !in_range(sig)) return real::sigaction()(sig, act, old);
  if (sig == own_signal::number()) return own_signal::on_sigaction(act, old);
  struct sigaction k, prev_oneshot;
  memset(&k, 0, sizeof k);
  memset(&prev_oneshot, 0, sizeof prev_oneshot);
  uint8_t before = g.bits[sig].load(std::memory_order_relaxed), after = before;
  int rc;
  if (!act) {
    rc = real::sigaction()(sig, nullptr, &k);
  } else if (g.managed[sig] && is_default(act)) {
    after = bits_for(act, true);
    rc = install_ours(sig, act, &k);
  } else if (route_through_us(sig, act)) {
    after = bits_for(act, false);
    read_oneshot(sig, &prev_oneshot);  // the one it replaces, if it was one, for *old
    rc = install_oneshot(sig, act, &k);
  } else {
    after = bits_for(act, false);
    // The kernel's sa_mask: never ours -- except for a handler that runs on
    // the program's alternate stack, which is the program's to size (8 KiB
    // is common): there the shim's signal waits until the handler returns
    // rather than land on top of it. (Here, Go's: others with SA_ONSTACK
    // are routed.)
    bool onstack = (act->sa_flags & SA_ONSTACK) && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
    if (bool(after & kMaskOurs) != onstack) {
      struct sigaction copy = *act;
      mask_ours(&copy.sa_mask, onstack);
      rc = real::sigaction()(sig, &copy, &k);
    } else {
      rc = real::sigaction()(sig, act, &k);
    }
  }
  if (rc != 0) return rc;
  if (after != before) g.bits[sig].store(after, std::memory_order_relaxed);
  if (old) view_of(sig, k, before, old, act && prev_oneshot.sa_handler ? &prev_oneshot : nullptr);
  return 0;
}

bool active() { return g.active; }

void step_aside() {
  if (!g.active) return;
  sigset_t all, was;
  sigfillset(&all);
  sigmask::unfiltered(SIG_SETMASK, &all, &was);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == own_signal::number()) continue;
    struct sigaction k, put;
    memset(&k, 0, sizeof k);
    if (real::sigaction()(sig, nullptr, &k) != 0) continue;
    if (is_ours(k)) {
      // The program's SIG_DFL, with the flags and mask it gave.
      view_of(sig, k, g.bits[sig].load(std::memory_order_relaxed), &put);
    } else if (is_oneshot(k)) {
      read_oneshot(sig, &put);  // the program's own handler, as it asked
    } else {
      continue;
    }
    real::sigaction()(sig, &put, nullptr);
  }
  g.active = false;
  sigmask::unfiltered(SIG_SETMASK, &was, nullptr);
}

}  // namespace signals
