// fatal_stop: a fatal signal's stop; see lifecycle.h. A signal that comes
// while its thread is inside the allocator or the loader, or holds
// something of the shim's (stackwalk.h: whose locks the stop needs), is
// deferred and taken again a moment later on the shim's signal, the other
// threads held at the shim's wrappers meanwhile; the stop itself runs on
// the signalled thread (stop_runner::fatal) under a watchdog that, past
// the bound, lets the signal end the process as it would have. What to do
// with a signal is fatal_state.h's decision; this file carries it out.
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>

#include "atomic_file.h"
#include "errline.h"
#include "fatal_state.h"
#include "finish.h"
#include "freeze.h"
#include "lifecycle.h"
#include "lifecycle_core.h"
#include "own_signal.h"
#include "real.h"
#include "recover.h"
#include "sandbox.h"
#include "shim_thread.h"
#include "sigmask.h"
#include "signals.h"
#include "snapshot.h"
#include "stack.h"
#include "stackwalk.h"
#include "stop_runner.h"
#include "sys.h"

namespace lifecycle {

using namespace core;

namespace {

// A fatal signal inside the allocator: again in 100 us, for at most 200 ms
// in all. Often: a thread that spends nearly all its time in malloc and
// free is outside them only a few times in a hundred, and each retry is a
// draw.
constexpr uint64_t kRetryNs = 100000;
constexpr int kMaxRetries = 2000;
// While one is deferred and the process is to die of it, the program's
// other threads park at the shim's wrappers for this long past each
// deferral (freeze::hold): without the shim they would be gone.
constexpr uint64_t kHoldNs = 10000000;

// The process's fatal signals, one field per phase (fatal_state.h): the
// signal whose stop runs here (kStopping, for its watchdog), the one being
// acted on (kDying: its thread stops for it, or waits for a stop under way
// and then lets it end the process), the one deferred (kDeferred) and the
// retries used on it.
struct Process {
  std::atomic<int> fatal_sig{0}, dying_sig{0}, deferred_sig{0}, retries{0};
};
Process g;

// This thread's part in them.
struct Thread {
  bool stopping;     // it runs a stop inline (a fatal signal's)
  int deferred_sig;  // a fatal signal it deferred, until its retry
  int retry_timer;   // and that retry's timer
  // The retry of a fatal signal it deferred, taken although the thread has
  // blocked it since (a worker that blocks every signal as it starts): the
  // kernel had given it to this thread already, and without the shim it
  // would have ended the process then. If the retry is deferred again, the
  // interrupted mask gets the signal back (forced_mask).
  int forced_sig;
  bool forced_mask;
  int retry_in_wait;  // that retry, raised in a sigwait's wrapper, which holds nothing
  bool ending;        // past its start routine: in glibc's teardown
  int in_handler;     // inside stop_on_fatal: a retry now would interrupt its deferral
};
__thread Thread t;

// What the fields above add up to.
fatal_state::Phase phase() {
  if (g.fatal_sig.load()) return fatal_state::Phase::kStopping;
  if (g.dying_sig.load()) return fatal_state::Phase::kDying;
  if (g.deferred_sig.load()) return fatal_state::Phase::kDeferred;
  return fatal_state::Phase::kQuiet;
}

struct FatalCall {
  int sig;
  siginfo_t* si;
  void* uc;
  bool forced_mask;
  bool in_wait;
  bool deferred;
};
bool fatal_on_this_stack(const FatalCall& c);
void fatal_call(void* p) {
  auto* c = static_cast<FatalCall*>(p);
  c->deferred = fatal_on_this_stack(*c);
}

// The process dies of a fatal signal now: from here on the program's
// threads park at the shim's wrappers (freeze.h), this one excepted.
void doomed() {
  freeze::exempt(true);
  freeze::announce(sys::now_ns(CLOCK_MONOTONIC) + cfg().stop_timeout_ms * 1000000ull + 5000000000ull);
}

// The deferred signal is sig's no more.
void forget_deferred(int sig) {
  int d = sig;
  g.deferred_sig.compare_exchange_strong(d, 0);
}

// A fatal signal is acted on now: the process dies of it once any stop
// under way is over.
void taken(int sig) {
  forget_deferred(sig);
  int none = 0;
  g.dying_sig.compare_exchange_strong(none, sig);
  doomed();
}

// Death by sig on this thread, as without the shim: its default action
// back, the signal sent, and unblocked here.
void die_by(int sig) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  real::sigaction()(sig, &dfl, nullptr);
  syscall(SYS_tgkill, raw_getpid(), sys::gettid(), sig);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigmask::unfiltered(SIG_UNBLOCK, &one, nullptr);
}
}  // namespace

namespace core {

void reset_fatal_retries() {
  g.retries.store(0);
  ctx().fatal_deferrals.store(0);
}

void die_of_deferred() {
  // Deferred while its thread was in the allocator, or being acted on by
  // a thread that waited for this stop, when a stop of the program's own
  // ended (another thread's exit): without the shim the process had died
  // of it already. Its own thread may get there first; either way it dies
  // of that signal, not of the exit.
  int sig = g.deferred_sig.load();
  if (sig <= 0) sig = g.dying_sig.load();
  if (sig > 0 && signals::serves_default(sig)) die_by(sig);
}

void fatal_after_fork() {
  // The parent's deferred signal is the parent's (its timer is not
  // inherited): nothing is due on the child's thread. (Its retries start
  // afresh with its image: reset_fatal_retries.)
  g.deferred_sig.store(0);
  g.dying_sig.store(0);
  t.deferred_sig = 0;
  t.forced_sig = 0;
  sigmask::set_retry_pending(false);
}

void fatal_thread_ending() {
  t.ending = true;
  // A fatal signal this thread deferred, whose retry would come to a thread
  // that is gone: sent again to the process, for a thread that is there.
  if (int sig = t.deferred_sig) {
    t.deferred_sig = 0;
    own_signal::disarm(t.retry_timer);
    sigmask::set_retry_pending(false);
    syscall(SYS_kill, raw_getpid(), sig);
  }
}

}  // namespace core

bool retry_forced(int sig) { return t.forced_sig == sig; }

namespace {
bool stop_on_fatal_here(int sig, siginfo_t* si, void* uc);

// A deferral's retry may fire before the handler that deferred returns
// (its timer is 100 us, a loaded machine is slower): it would meet that
// handler's own mask, which blocks the signal, take it for the program's
// and unblock it there, so the signal came again over the frames of the
// allocator that the deferral was for, nested deeper each time until the
// walk no longer reached them and the stop waited on a lock its own thread
// held (the process hung to the stop's bound). Counted here, the retry
// waits for the handler's return; the shim's signal is blocked from the
// deferral to the return, which restores the interrupted mask.
struct InHandler {
  InHandler() { ++t.in_handler; }
  ~InHandler() { --t.in_handler; }
};
}  // namespace

bool stop_on_fatal(int sig, siginfo_t* si, void* uc) {
  InHandler here;
  bool deferred = stop_on_fatal_here(sig, si, uc);
  if (deferred && sigmask::ours()) {
    sigset_t own;
    sigemptyset(&own);
    sigaddset(&own, sigmask::ours());
    sigmask::unfiltered(SIG_BLOCK, &own, nullptr);
  }
  return deferred;
}

namespace {
bool stop_on_fatal_here(int sig, siginfo_t* si, void* uc) {
  sandbox::OwnCalls own;
  const bool forced_mask = t.forced_sig == sig && t.forced_mask, in_wait = t.retry_in_wait == sig;
  if (t.forced_sig == sig) t.forced_sig = 0;  // another fatal signal's handler may come first
  if (g_state.load() == kInert || vfork_child() || sandbox::stop_forbidden()) return false;
  bool fault = signals::synchronous_fault(sig, si);
  // A fault inside the stop itself ends the stop, not the process; so does
  // an abort() of a library the stop uses (libdw's and libelf's asserts).
  bool self_abort = sig == SIGABRT && si && si->si_code == SI_TKILL && si->si_pid == raw_getpid();
  if ((fault || self_abort) && recover::active()) recover::escape_from_fault(sig);
  if (stop_runner::on_stop_thread() || snapshot::on_worker()) {
    // A thread of the shim's own, outside its recovery point (the
    // allocator's thread teardown after a stop that ran out of memory):
    // nothing of the program's runs here, so this thread alone ends, at
    // once, without libc's thread exit (which would call into the allocator
    // again). Any other signal is blocked on this thread.
    if (snapshot::on_worker()) {
      errline::line("error: the snapshot worker crashed: no more snapshots or heap peaks");
      snapshot::worker_crashed();
    } else {
      finish::report_failure(ctx(), "the stop crashed");
      mark_done();
    }
    syscall(SYS_exit, 0);
  }
  // Another signal in this thread's own fatal stop, outside the stop's
  // recovery: nothing to wait for (it would be waiting for itself).
  if (t.stopping) return false;
  // A fault is never deferred: the other threads stop at their next call
  // from here, before the walks below.
  if (fault) doomed();
  // Everything from here runs on a stack of its own: the handler may be on
  // the program's small alternate stack, and unwinding alone wants more.
  FatalCall c = {sig, si, uc, forced_mask, in_wait, false};
  if (!stack::run_on_fresh(shim_thread::kStack, fatal_call, &c)) {
    if (claim_stop(fatal_state::signal_name(sig))) {
      finish::report_failure(ctx(), "out of memory (no stack for the stop)");
      mark_done();
    }
    return false;
  }
  return c.deferred;
}

// Past its start routine, in glibc's teardown: the signal goes to the
// process again, with this thread blocking it, for another thread that does
// not (fatal_state::Verdict::kElsewhere).
void send_elsewhere(int sig, ucontext_t* uc) {
  sigaddset(&uc->uc_sigmask, sig);
  syscall(SYS_kill, raw_getpid(), sig);
}

// In unsafe code: a sent signal is taken again in a moment, when the thread
// has left it, on the shim's signal once this handler has returned. False
// if no retry could be armed.
bool defer(const FatalCall& c, ucontext_t* uc) {
  const int sig = c.sig;
  g.deferred_sig.store(sig);
  // Held only, not announced: the program may install a handler of its
  // own before the retry, and then lives on.
  if (signals::serves_default(sig)) freeze::hold(sys::now_ns(CLOCK_MONOTONIC) + kHoldNs);
  if (c.forced_mask) sigaddset(&uc->uc_sigmask, sig);  // as the program set it
  if (t.ending) {
    // In unsafe code in this thread's teardown (its thread cache flushed by
    // a TLS destructor): a retry aimed at this thread would meet a thread
    // that is gone. It keeps the signal blocked from here on and the
    // process gets it again, for a thread that is there.
    send_elsewhere(sig, uc);
    ctx().fatal_deferrals.fetch_add(1);
    return true;
  }
  t.deferred_sig = sig;
  t.retry_timer = own_signal::arm_self(own_signal::kRetryFatal, kRetryNs);
  if (t.retry_timer >= 0) {
    sigmask::set_retry_pending(true);
    ctx().fatal_deferrals.fetch_add(1);
    return true;
  }
  t.deferred_sig = 0;
  return false;
}

// In unsafe code and unable to wait: no stop (its locks may be held by this
// very thread), one line that says why, and the process dies of it.
void refuse(int sig, bool fault) {
  taken(sig);
  if (claim_stop(fatal_state::signal_name(sig))) {
    finish::report_failure(ctx(), fault ? "the program crashed in code a stop cannot interrupt "
                                          "(the allocator, the loader, or the shim's own)"
                                        : "the signal came while the program was in code a stop cannot "
                                          "interrupt (the allocator, the loader, or the shim's own)");
    mark_done();
  }
  wait_done();
}

bool fatal_on_this_stack(const FatalCall& c) {
  const int sig = c.sig;
  auto* uc = static_cast<ucontext_t*>(c.uc);
  const int state = g_state.load();
  fatal_state::Facts f;
  f.profiling = state == kRunning || state == kStopping;
  f.fault = signals::synchronous_fault(sig, c.si);
  f.thread_ending = t.ending;
  // The retry comes on the shim's signal: not if the interrupted code
  // blocks it (a program's alternate-stack handler).
  f.retry_can_come = !sigismember(&uc->uc_sigmask, own_signal::number());
  f.another_takes = [](void* a) { return freeze::another_takes(static_cast<FatalCall*>(a)->sig); };
  f.in_unsafe_code = [](void* a) {
    auto* call = static_cast<FatalCall*>(a);
    return stackwalk::interrupted_in_unsafe_code(call->uc, call->in_wait);
  };
  f.take_retry = [](void*) { return g.retries.fetch_add(1) < kMaxRetries; };
  f.arg = const_cast<FatalCall*>(&c);
  switch (fatal_state::decide(f)) {
    case fatal_state::Verdict::kElsewhere:
      send_elsewhere(sig, uc);
      return true;
    case fatal_state::Verdict::kDefer:
      if (defer(c, uc)) return true;
      refuse(sig, f.fault);
      return false;
    case fatal_state::Verdict::kRefuse:
      refuse(sig, f.fault);
      return false;
    case fatal_state::Verdict::kStop:
      break;
  }
  taken(sig);
  if (claim_stop(fatal_state::signal_name(sig))) {
    g.fatal_sig.store(sig);
    t.stopping = true;
    stop_runner::fatal(ctx());
    mark_done();
    return false;
  }
  wait_done();
  return false;
}

}  // namespace

void on_watchdog(void* uc) {
  if (stop_runner::on_watchdog(uc)) return;  // a normal stop in place (abandoned: no return)
  if (phase() != fatal_state::Phase::kStopping) return;  // a late timer: no stop is under way here
  // On the thread of a fatal stop that ran past its bound, interrupting it
  // wherever it is: say so, remove what is half-written, and die of the
  // signal as the process would have.
  if (!g_gave_up.exchange(true)) {
    atomic_file::abandon();
    finish::report_timeout(ctx());
  }
  die_by(g.fatal_sig.load());
}

void on_retry_fatal(const siginfo_t* si, void* uc) {
  // One shot: its timer goes. Then the signal, sent again to this thread:
  // in a handler (uc), blocked until the handler returns to where the
  // program now is, where the fatal handler meets it; in a sigwait that
  // took our signal, at once.
  if (si) syscall(SYS_timer_delete, si->si_timerid);
  // Inside the handler that deferred it (see InHandler): again once that
  // handler has returned to the code it interrupted.
  if (uc && t.in_handler && t.deferred_sig) {
    t.retry_timer = own_signal::arm_self(own_signal::kRetryFatal, kRetryNs);
    if (t.retry_timer >= 0) return;
  }
  // This thread's own (two threads may each have deferred one).
  int sig = t.deferred_sig ? t.deferred_sig : g.deferred_sig.load();
  t.deferred_sig = 0;
  sigmask::set_retry_pending(false);
  if (sig <= 0) return;
  sigset_t one, now;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigset_t* back = uc ? &static_cast<ucontext_t*>(uc)->uc_sigmask : &now;
  if (!uc) sigmask::unfiltered(SIG_BLOCK, nullptr, &now);
  // Blocked by the program since it was deferred: still taken here (the
  // kernel gave it to this thread; a retry left pending would hang a
  // process that, without the shim, had ended), unless the program has
  // taken the signal over by now.
  // Not inside a stop on this thread: then the mask that holds it is the
  // stop's own (a fatal handler's, an in-place stop's), and the signal
  // waits for the stop's end, when the process dies of it anyway. A stop
  // on another thread (exit) is waited for by the forced signal's handler,
  // which then ends the process as the signal would have.
  const bool in_mask = sigismember(back, sig) == 1;
  const bool ours = signals::serves_default(sig);
  if (!ours) {
    forget_deferred(sig);  // the program's own disposition has it now
    freeze::release();
  }
  const bool force = (in_mask || sigmask::view_blocks(sig)) && !t.stopping && !stop_runner::stopping_here() && ours;
  if (force) t.forced_sig = sig, t.forced_mask = in_mask;
  if (uc) {
    if (force) sigdelset(back, sig);
    sigmask::unfiltered(SIG_BLOCK, &one, nullptr);
    syscall(SYS_tgkill, raw_getpid(), sys::gettid(), sig);
    return;
  }
  t.retry_in_wait = sig;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // all stored before the handler runs
  syscall(SYS_tgkill, raw_getpid(), sys::gettid(), sig);  // unblocked: its handler runs on the way back
  if (force && in_mask) {
    sigmask::unfiltered(SIG_UNBLOCK, &one, nullptr);  // the handler runs here
    sigmask::unfiltered(SIG_BLOCK, &one, nullptr);    // as the program had it
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t.retry_in_wait = 0;
}

}  // namespace lifecycle
