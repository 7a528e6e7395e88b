// stop_runner: where a claimed stop runs; see stop_runner.h.
#include "stop_runner.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "atomic_file.h"
#include "freeze.h"
#include "heap.h"
#include "own_signal.h"
#include "recover.h"
#include "sandbox.h"
#include "shim_thread.h"
#include "sigmask.h"
#include "signals.h"
#include "stack.h"
#include "stackwalk.h"
#include "sys.h"

namespace stop_runner {
namespace {

// The stop under way (one per image at a time: lifecycle's claim).
finish::Context* g_ctx;
void (*g_done)();
// This thread runs a normal stop in place, bounded by a timer: kUnderWay
// from before the timer is armed until the stop is over, then kOver while
// the timer is disarmed.
enum InPlace { kNone, kUnderWay, kOver };
__thread int t_in_place;
__thread bool t_stop_thread;  // this thread is a stop thread
__thread bool t_alone;        // the in-place stop is the process's only thread's
__thread int t_watchdog;      // the in-place stop's watchdog timer
__thread bool t_held;         // a Place holds this thread's signals for a stop here

void run_finish(void*) { finish::run(*g_ctx); }

// A write of the stop's that starts past RLIMIT_FSIZE raises SIGXFSZ at
// its thread (jemalloc's heap dump into its memfd, a file of libelf's; the
// shim's own writes stop short of it): held back while a stop runs on a
// program's thread, and taken off again unless it was pending before, so the
// program never gets it. (A thread of the shim's holds every signal; one
// pending there goes with the thread.) Signal-safe.
class HoldXfsz {
 public:
  HoldXfsz() {
    sigset_t s = only();
    sigmask::unfiltered(SIG_BLOCK, &s, &old_);
    was_pending_ = pending();
  }
  ~HoldXfsz() {
    sigset_t s = only();
    if (!was_pending_ && pending()) {
      struct timespec now = {0, 0};
      syscall(SYS_rt_sigtimedwait, &s, nullptr, &now, NSIG / 8);
    }
    if (sigismember(&old_, SIGXFSZ) != 1) sigmask::unfiltered(SIG_UNBLOCK, &s, nullptr);
  }

 private:
  static sigset_t only() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGXFSZ);
    return s;
  }
  static bool pending() {
    sigset_t p;
    sigemptyset(&p);
    return syscall(SYS_rt_sigpending, &p, NSIG / 8) == 0 && sigismember(&p, SIGXFSZ) == 1;
  }
  sigset_t old_;
  bool was_pending_;
};

// The stop with a way out: a crash or an allocation failure inside it ends
// the stop with one line, not the process.
void finish_guarded(void* = nullptr) {
  const char* why = nullptr;
  if (!recover::run(run_finish, nullptr, &why)) finish::report_failure(*g_ctx, why);
}

void own_signal_mask(int how) {
  sigset_t ours;
  sigemptyset(&ours);
  sigaddset(&ours, own_signal::number());
  sigmask::unfiltered(how, &ours, nullptr);
}
void unblock_own_signal() { own_signal_mask(SIG_UNBLOCK); }

// Past the deadline the watchdog (the shim's signal on this thread) ends
// the stop: on_watchdog(), or lifecycle's for a fatal stop.
int arm_watchdog() {
  uint64_t now = sys::now_ns(CLOCK_MONOTONIC), deadline = g_ctx->deadline_mono_ns;
  return own_signal::arm_self(own_signal::kWatchdog, deadline > now ? deadline - now : 1);
}

void stop_thread_body(void* altp) {
  shim_thread::enter_allocator();
  *static_cast<void**>(altp) = signals::ensure_altstack();  // a fault in the stop reaches recover
  run_finish(nullptr);
}

void* stop_thread(void*) {
  sandbox::OwnCalls own;  // every call on this thread is the shim's
  sigmask::Internal inside;
  t_stop_thread = true;
  freeze::exempt(true);
  prctl(PR_SET_NAME, "profshim-stop", 0, 0, 0);
  void* alt = nullptr;
  const char* why = nullptr;
  if (!recover::run(stop_thread_body, &alt, &why)) finish::report_failure(*g_ctx, why);
  g_done();
  signals::release_altstack(alt);
  return nullptr;
}

void in_place(void*) {
  // The timer is armed with its signal held, so that its handler knows
  // the stop and the timer's id however soon it fires: a process starved of
  // CPU (a cgroup quota) may reach this point past the deadline, and a
  // watchdog that fired before the stop was marked would be lost, leaving
  // the stop unbounded.
  own_signal_mask(SIG_BLOCK);
  const bool exempt = freeze::exempt(true);
  t_in_place = kUnderWay;
  t_watchdog = arm_watchdog();
  std::atomic_signal_fence(std::memory_order_seq_cst);  // both stored before the watchdog's handler can run
  // The watchdog's signal must reach this thread: a program's handler may
  // block it (one on its alternate stack).
  unblock_own_signal();
  {
    HoldXfsz hold;
    finish_guarded();
  }
  t_in_place = kOver;  // a watchdog from here on finds the stop over
  std::atomic_signal_fence(std::memory_order_seq_cst);
  own_signal::disarm(t_watchdog);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_in_place = kNone;
  freeze::exempt(exempt);
}

// The stop on the program's only thread (its signals held: Place), whose
// allocations while it runs are the shim's.
void alone_in_place(void*) {
  const bool was = heap::swap_thread_active(false);
  t_alone = true;
  in_place(nullptr);
  t_alone = false;
  heap::set_thread_active(was);
}

}  // namespace

Place::Place(bool in_handler) : in_handler(in_handler), held_(false) {
  // The process's only thread: nothing can hold a lock the stop needs, and
  // the stop runs here. A thread started and waited for costs an image a
  // clone, a fresh arena and two hand-overs between cores, a large part of
  // what a short image pays for being profiled. (Only this thread could
  // start another, and it is here.)
  here = !in_handler && sys::single_threaded();
  if (in_handler || here) hold();
}

void Place::hold() {
  if (held_) return;
  // Every signal but the watchdog's and a fault's, as the stop thread holds
  // them all.
  sigset_t all;
  shim_thread::work_mask(&all);
  sigdelset(&all, own_signal::number());
  sigmask::unfiltered(SIG_SETMASK, &all, &old_);
  held_ = true;
  t_held = true;
}

Place::~Place() {
  if (!held_) return;
  t_held = false;
  sigmask::unfiltered(SIG_SETMASK, &old_, nullptr);
}

void normal(finish::Context& ctx, Place& place, void (*done)()) {
  sandbox::OwnCalls own;
  g_ctx = &ctx, g_done = done;
  const bool in_handler = place.in_handler, here = place.here;
  if (!in_handler && !here && shim_thread::spawn(stop_thread, nullptr)) return;
  // No thread for it (thread limits, no memory): here, held as on the only
  // thread.
  place.hold();
  void (*how)(void*) = in_handler ? in_place : here ? alone_in_place : finish_guarded;
  bool ran = stack::run_on_fresh(shim_thread::kStack, how, nullptr);
  // Under an address-space limit a program that freed everything may still
  // have it mapped by its allocator: what is free goes back, once, and the
  // stop tries again (not in a handler: the allocator's locks).
  if (!ran && !in_handler && heap::give_back()) ran = stack::run_on_fresh(shim_thread::kStack, how, nullptr);
  if (!ran) finish::report_failure(ctx, "out of memory (no stack for the stop)");
  done();
}

void fatal(finish::Context& ctx) {
  sandbox::OwnCalls own;
  g_ctx = &ctx;
  // The watchdog's signal must reach this thread: a fatal signal can come
  // inside the shim's own handler (an external SIGRTMAX-4) or a program's
  // handler whose kernel sa_mask holds it (one on its alternate stack).
  unblock_own_signal();
  freeze::others_before(ctx.deadline_mono_ns);
  int watchdog = arm_watchdog();
  {
    HoldXfsz hold;
    finish_guarded();
  }
  own_signal::disarm(watchdog);
}

bool on_watchdog(void* uc) {
  // A normal stop run in place (exit() called in a signal handler, or on
  // the only thread): past its bound it is abandoned, and the program's
  // exit goes on.
  if (t_in_place == kNone) return false;
  if (t_in_place == kOver) return true;  // its work is over: the timer is being disarmed
  // Not from inside the allocator, the loader or libc: a lock left held
  // there would hang the program's next malloc or its exit. A moment later,
  // when the stop's own code has the thread again (such calls take
  // microseconds); 250 ms past the bound (a process starved of CPU gets few
  // moments) the stop is left wherever it is. Nor before the stop has its
  // recovery point, or after it: a moment later it is there, or over.
  const bool late = sys::now_ns(CLOCK_MONOTONIC) >= g_ctx->deadline_mono_ns + 250000000ull;
  if (!recover::active() || (!late && stackwalk::holds_program_locks(uc))) {
    own_signal::disarm(t_watchdog);
    t_watchdog = own_signal::arm_self(own_signal::kWatchdog, 1000000);
    return true;
  }
  if (t_alone) {
    // As a caller waiting for a stop thread would have: the half-written
    // file removed, the timeout's line (the writer is this thread: no wait).
    atomic_file::abandon();
    finish::report_timeout(*g_ctx);
  }
  recover::fail("it did not finish within PROFILE_STOP_TIMEOUT");
}

bool on_stop_thread() { return t_stop_thread; }

bool stopping_here() { return t_stop_thread || t_in_place != kNone || t_held; }

}  // namespace stop_runner
