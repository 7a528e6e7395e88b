// lifecycle: setup, the state machine and where the stop runs; see
// lifecycle.h.
#include "lifecycle.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "atomic_file.h"
#include "config.h"
#include "errline.h"
#include "finish.h"
#include "heap.h"
#include "image.h"
#include "own_signal.h"
#include "real.h"
#include "recover.h"
#include "sampler.h"
#include "sigmask.h"
#include "shim_thread.h"
#include "signals.h"
#include "snapshot.h"
#include "stack.h"
#include "stackwalk.h"
#include "stop_runner.h"
#include "symbolize.h"
#include "sys.h"
#include "waits.h"

namespace lifecycle {
namespace {

enum State : int { kInert, kRunning, kStopping, kDone };

constexpr uint64_t kRetryNs = 1000000;         // a fatal signal inside the allocator: again in 1 ms
constexpr int kMaxRetries = 200;

std::atomic<int> g_state{kInert};
std::atomic<bool> g_gave_up{false};  // a waiter gave up on this image's stop
std::atomic<bool> g_main_exited{false};
std::atomic<long> g_threads{0};      // threads started through the shim, alive
std::atomic<int> g_execs{0};         // execs under way (each stopped the image)
std::atomic<bool> g_stop_as_name{false};  // this image's stop writes the root's NAME.*
pthread_key_t g_thread_key;
volatile uint32_t g_done = 0;        // futex word: the stop finished
// A fatal signal's stop: which signal (for its watchdog), and the one being
// deferred while its thread was inside the allocator.
std::atomic<int> g_fatal_sig{0}, g_deferred_sig{0}, g_retries{0};
__thread bool t_stopping;     // this thread runs a stop inline (a fatal signal's)
__thread int t_deferred_sig;  // a fatal signal this thread deferred, until its retry
__thread int t_retry_timer;   // and that retry's timer
// The retry of a fatal signal this thread deferred, taken although the
// thread has blocked it since (a worker that blocks every signal as it
// starts): the kernel had given it to this thread already, and without the
// shim it would have ended the process then. If the retry is deferred again,
// the interrupted mask gets the signal back (t_forced_mask).
__thread int t_forced_sig;
__thread bool t_forced_mask;
__thread int t_retry_in_wait;  // that retry, raised in a sigwait's wrapper, which holds nothing
__thread bool t_ending;       // past its start routine: in glibc's thread teardown
const config::Config* g_cfg;  // setup's (setup.cc), never destroyed

const config::Config& cfg() { return *g_cfg; }
// Built on first use (our constructor may run before this file's C++
// initialisers would) and never destroyed: after a stop that timed out, the
// stop thread may still read it while exit() runs the atexit destructors.
finish::Context& ctx() {
  static finish::Context* c = new finish::Context();
  return *c;
}

pid_t raw_getpid() { return pid_t(syscall(SYS_getpid)); }

bool vfork_child() { return raw_getpid() != image::pid(); }

const char* signal_name(int sig) {
  static const char* const kNames[] = {
      "signal 0",       "signal SIGHUP",  "signal SIGINT",  "signal SIGQUIT", "signal SIGILL",
      "signal SIGTRAP", "signal SIGABRT", "signal SIGBUS",  "signal SIGFPE",  "signal SIGKILL",
      "signal SIGUSR1", "signal SIGSEGV", "signal SIGUSR2", "signal SIGPIPE", "signal SIGALRM",
      "signal SIGTERM", "signal 16",      "signal 17",      "signal 18",      "signal 19",
      "signal 20",      "signal 21",      "signal 22",      "signal 23",      "signal SIGXCPU",
      "signal SIGXFSZ"};
  if (sig == own_signal::number()) return "signal SIGRTMAX-4";
  return sig > 0 && sig < int(sizeof kNames / sizeof kNames[0]) ? kNames[sig] : "a signal";
}

// The first stop path wins: RUNNING -> STOPPING, and what the stop reports;
// stem, if given, is what it writes under (only the winner sets it: the
// stop thread reads it). Signal-safe without stem.
bool claim_stop(const char* how, const std::string* stem = nullptr) {
  int running = kRunning;
  if (!g_state.compare_exchange_strong(running, kStopping)) return false;
  finish::Context& c = ctx();
  if (stem) c.stem = *stem;
  g_stop_as_name.store(!stem && image::root());
  c.how = how;
  c.stop_mono_ns = sys::now_ns(CLOCK_MONOTONIC);
  __atomic_store_n(&c.deadline_mono_ns, c.stop_mono_ns + cfg().stop_timeout_ms * 1000000ull, __ATOMIC_RELEASE);
  errline::set_deadline(c.deadline_mono_ns);
  return true;
}

void mark_done() {
  // Whatever way the stop ended, the snapshot worker does nothing more.
  snapshot::halt(ctx().deadline_mono_ns);
  g_state.store(kDone);
  __atomic_store_n(&g_done, 1, __ATOMIC_RELEASE);
  sys::futex_wake(&g_done);
}

// Waits for the stop, at most until its deadline; past it, says so once,
// removes what is half-written, and lets the caller go on. Signal-safe.
void wait_done() {
  // The claimer sets the deadline just after its claim: a waiter that comes
  // in between counts the bound from now (microseconds later than it).
  uint64_t fallback = sys::now_ns(CLOCK_MONOTONIC) + cfg().stop_timeout_ms * 1000000ull;
  for (;;) {
    if (__atomic_load_n(&g_done, __ATOMIC_ACQUIRE)) return;
    if (g_gave_up.load()) return;
    uint64_t now = sys::now_ns(CLOCK_MONOTONIC);
    uint64_t deadline = __atomic_load_n(&ctx().deadline_mono_ns, __ATOMIC_ACQUIRE);
    if (!deadline) deadline = fallback;
    if (now >= deadline) break;
    sys::futex_wait(&g_done, 0, deadline - now);
  }
  if (g_gave_up.exchange(true)) return;
  atomic_file::abandon();
  finish::report_timeout(ctx());
}

// new_engines: a new image (setup, a fork child), not one that goes on
// after a failed exec: what the engines' next sets cover begins now.
void begin_image(bool new_engines) {
  finish::Context& c = ctx();
  c.stem = image::stem();
  c.start_mono_ns = sys::now_ns(CLOCK_MONOTONIC);
  c.start_real_ns = sys::now_ns(CLOCK_REALTIME);
  if (new_engines) {
    engine::When now;
    now.mono_ns = c.start_mono_ns, now.real_ns = c.start_real_ns;
    int n = 0;
    const engine::Engine* const* all = engine::all(&n);
    for (int i = 0; i < n; ++i) all[i]->begin(now);
  }
  c.reported.store(false);
  __atomic_store_n(&c.deadline_mono_ns, 0, __ATOMIC_RELEASE);
  g_stop_as_name.store(false);
  g_done = 0;
  g_gave_up.store(false);
  g_retries.store(0);
  atomic_file::reset();
}

// A stop in the normal course of the program (stop_runner.h says where it
// runs), waited for with a bound.
void normal_stop(const char* how, const std::string* stem = nullptr) {
  if (claim_stop(how, stem)) {
    stackwalk::Context where = stackwalk::calling_context();
    if (where == stackwalk::kHandlerOverUnsafeCode) {
      // The program's signal handler interrupted its own malloc and called
      // exit(): the allocator's state on this thread is half-changed, and
      // the stop allocates. No profile rather than a hang.
      finish::report_failure(ctx(), "exit was called in a signal handler that interrupted the allocator");
      mark_done();
    } else {
      stop_runner::normal(ctx(), where == stackwalk::kHandler, mark_done);
    }
  }
  if (g_state.load() != kInert) wait_done();
}

void before_fork() {
  if (g_state.load() == kRunning && cfg().cpu_hz) sampler::quiesce_for_fork();
}

void after_fork_in_parent() {
  if (g_state.load() == kRunning && cfg().cpu_hz) sampler::resume_after_fork_in_parent();
}

// The child of fork profiles itself from here on, as its own image.
void after_fork_in_child() {
  own_signal::after_fork();
  errline::forked();
  if (g_state.load() != kRunning) {
    g_state.store(kInert);
    return;
  }
  image::after_fork(raw_getpid());
  // The forking thread is the child's only one: if the shim started it, its
  // end is the child's last thread's end.
  bool started = pthread_getspecific(g_thread_key) != nullptr;
  g_threads.store(started ? 1 : 0);
  g_main_exited.store(started);
  g_execs.store(0);
  g_retries.store(0);
  if (cfg().cpu_hz) sampler::reset_after_fork();
  if (cfg().wait_sample_ns) waits::reset_after_fork();
  begin_image(true);
  snapshot::after_fork_in_child(ctx().start_mono_ns);
}

// The key's value is the thread's alternate stack if we gave it one, else
// a non-null marker (a destructor runs only for a non-null value).
void on_thread_end(void* v) {
  if (v != reinterpret_cast<void*>(1)) signals::release_altstack(v);
  if (g_threads.fetch_sub(1) == 1 && g_main_exited.load()) stop("the last thread's exit");
}

// Last in line: a stop path the shim did not see (libc's internal exit after
// pthread_exit from main in a thread it did not start, say) still gets its
// profiles, though after the program's own atexit handlers.
void at_exit_fallback() { stop("exit (seen only at atexit)"); }

}  // namespace

uint64_t start(const config::Config* cfg, const char* timeout_text) {
  g_cfg = cfg;
  finish::Context& c = ctx();
  c.cfg = cfg;
  snprintf(c.timeout_text, sizeof c.timeout_text, "%s", timeout_text);
  begin_image(true);
  pthread_key_create(&g_thread_key, on_thread_end);
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
  atexit(at_exit_fallback);
  g_state.store(kRunning);
  return c.start_mono_ns;
}


bool active() { return g_state.load(std::memory_order_relaxed) == kRunning; }

bool profiling() { return g_state.load(std::memory_order_relaxed) != kInert; }

void stop(const char* how) {
  if (g_state.load() == kInert || vfork_child()) return;
  int saved = errno;  // the program's atexit handlers may look at it
  normal_stop(how);
  errno = saved;
}

namespace {
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
}  // namespace

bool retry_forced(int sig) { return t_forced_sig == sig; }

bool stop_on_fatal(int sig, siginfo_t* si, void* uc) {
  const bool forced_mask = t_forced_sig == sig && t_forced_mask, in_wait = t_retry_in_wait == sig;
  if (t_forced_sig == sig) t_forced_sig = 0;  // another fatal signal's handler may come first
  if (g_state.load() == kInert || vfork_child()) return false;
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
  if (t_stopping) return false;
  // Everything from here runs on a stack of its own: the handler may be on
  // the program's small alternate stack, and unwinding alone wants more.
  FatalCall c = {sig, si, uc, forced_mask, in_wait, false};
  if (!stack::run_on_fresh(shim_thread::kStack, fatal_call, &c)) {
    if (claim_stop(signal_name(sig))) {
      finish::report_failure(ctx(), "out of memory (no stack for the stop)");
      mark_done();
    }
    return false;
  }
  return c.deferred;
}

namespace {
bool fatal_on_this_stack(const FatalCall& c) {
  const int sig = c.sig;
  siginfo_t* si = c.si;
  void* uc = c.uc;
  bool fault = signals::synchronous_fault(sig, si);
  int state = g_state.load();
  if ((state == kRunning || state == kStopping) && stackwalk::interrupted_in_unsafe_code(uc, c.in_wait)) {
    // Inside the allocator (or the loader, or the shim): its locks may be
    // held by this very thread, and a stop -- ours, or one under way on
    // another thread -- needs them. A sent signal is taken again in a
    // moment, when the thread has left; a fault there cannot be, nor written.
    // The retry comes on the shim's signal, once this handler has returned:
    // not if the interrupted code blocks it (a program's alternate-stack
    // handler), nor with retries used up.
    bool can_return = !sigismember(&static_cast<ucontext_t*>(uc)->uc_sigmask, own_signal::number());
    if (!fault && can_return && g_retries.fetch_add(1) < kMaxRetries) {
      g_deferred_sig.store(sig);
      if (c.forced_mask) sigaddset(&static_cast<ucontext_t*>(uc)->uc_sigmask, sig);  // as the program set it
      if (t_ending) {
        // Inside the allocator in this thread's teardown (its thread cache
        // flushed by a TLS destructor): a retry aimed at this thread would
        // meet a thread that is gone. It keeps the signal blocked from here
        // on and the process gets it again, for a thread that is there.
        sigaddset(&static_cast<ucontext_t*>(uc)->uc_sigmask, sig);
        syscall(SYS_kill, raw_getpid(), sig);
        return true;
      }
      t_deferred_sig = sig;
      t_retry_timer = own_signal::arm_self(own_signal::kRetryFatal, kRetryNs);
      if (t_retry_timer >= 0) {
        sigmask::set_retry_pending(true);
        return true;
      }
      t_deferred_sig = 0;
    }
    if (claim_stop(signal_name(sig))) {
      finish::report_failure(ctx(), fault ? "the program crashed inside the allocator"
                                          : "the signal came while the program was inside the allocator");
      mark_done();
    }
    wait_done();
    return false;
  }
  if (claim_stop(signal_name(sig))) {
    g_fatal_sig.store(sig);
    t_stopping = true;
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
  if (g_fatal_sig.load() == 0) return;        // a late timer: no stop is under way here
  // On the thread of a fatal stop that ran past its bound, interrupting it
  // wherever it is: say so, remove what is half-written, and die of the
  // signal as the process would have.
  if (!g_gave_up.exchange(true)) {
    atomic_file::abandon();
    finish::report_timeout(ctx());
  }
  int sig = g_fatal_sig.load();
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

void on_retry_fatal(const siginfo_t* si, void* uc) {
  // One shot: its timer goes. Then the signal, sent again to this thread:
  // in a handler (uc), blocked until the handler returns to where the
  // program now is, where the fatal handler meets it; in a sigwait that
  // took our signal, at once.
  if (si) syscall(SYS_timer_delete, si->si_timerid);
  // This thread's own (two threads may each have deferred one).
  int sig = t_deferred_sig ? t_deferred_sig : g_deferred_sig.load();
  t_deferred_sig = 0;
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
  const bool in_mask = sigismember(back, sig) == 1;
  const bool force = (in_mask || sigmask::view_blocks(sig)) && signals::serves_default(sig);
  if (force) t_forced_sig = sig, t_forced_mask = in_mask;
  if (uc) {
    if (force) sigdelset(back, sig);
    sigmask::unfiltered(SIG_BLOCK, &one, nullptr);
    syscall(SYS_tgkill, raw_getpid(), sys::gettid(), sig);
    return;
  }
  t_retry_in_wait = sig;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // all stored before the handler runs
  syscall(SYS_tgkill, raw_getpid(), sys::gettid(), sig);  // unblocked: its handler runs on the way back
  if (force && in_mask) {
    sigmask::unfiltered(SIG_UNBLOCK, &one, nullptr);  // the handler runs here
    sigmask::unfiltered(SIG_BLOCK, &one, nullptr);    // as the program had it
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_retry_in_wait = 0;
}

char* const* before_exec(char* const envp[]) {
  int state = g_state.load();
  if (state == kInert || vfork_child()) return envp;
  g_execs.fetch_add(1);
  bool successor = image::env_profiles(envp);
  // The root's image before an exec is not its final one when what it execs
  // profiles too: that one writes NAME.*, this one NAME.PROG.PID.*.
  const std::string pre_exec = image::stem(false);
  normal_stop("exec", image::root() && successor ? &pre_exec : nullptr);
  sigmask::before_exec();
  if (!successor) return envp;
  // Another path (exit on another thread, a signal) stopped this image first,
  // as the root's final one, under NAME: the image this exec starts must not
  // write NAME.* over it, so it is not the root.
  char** env = image::exec_env(envp, !g_stop_as_name.load());
  return env ? env : envp;
}

bool in_vfork_child() { return g_state.load() != kInert && vfork_child(); }

void exec_failed(char* const envp[], char* const* env) {
  if (env != envp) free(const_cast<char**>(env));
  if (g_state.load() == kInert || vfork_child()) return;
  sigmask::after_failed_exec();
  // The last exec under way to fail resumes the image, once.
  if (g_execs.fetch_sub(1) != 1 || g_state.load() != kDone || g_gave_up.load()) return;
  // Same image, still running: profile on, and its final stop writes again.
  begin_image(false);
  if (cfg().heap_sample) heap::set_active(true);
  if (cfg().cpu_hz) sampler::resume();
  if (cfg().wait_sample_ns) waits::resume();
  g_state.store(kRunning);
  snapshot::resume();
}

void main_thread_exiting() {
  if (g_state.load() != kRunning || vfork_child()) return;
  // Mark first, then count: a last worker ending in between sees the mark,
  // and the stop is idempotent, so neither order of the two is lost.
  g_main_exited.store(true);
  if (g_threads.load() == 0) stop("pthread_exit from main");
}

void thread_creating() {
  g_threads.fetch_add(1);
  // Before the program's first thread of its own: from here on a stop may
  // meet other threads, and must not be the one to load libdw (setup.cc).
  static std::atomic<bool> libdw{false};
  if (!libdw.exchange(true)) {
    const bool was = heap::swap_thread_active(false);
    symbolize::load_libdw(nullptr);  // a failure is the stop's to report, as a missing symbol
    heap::set_thread_active(was);
  }
}

void thread_create_failed() { g_threads.fetch_sub(1); }

void thread_ending() {
  t_ending = true;
  // A fatal signal this thread deferred, whose retry would come to a thread
  // that is gone: sent again to the process, for a thread that is there.
  if (int sig = t_deferred_sig) {
    t_deferred_sig = 0;
    own_signal::disarm(t_retry_timer);
    sigmask::set_retry_pending(false);
    syscall(SYS_kill, raw_getpid(), sig);
  }
}

void thread_started(uint64_t creator_view, void* start_fn) {
  stackwalk::note_thread_stack();
  void* alt = signals::ensure_altstack();
  pthread_setspecific(g_thread_key, alt ? alt : reinterpret_cast<void*>(1));
  sigmask::thread_begin(creator_view);
  sampler::thread_begin(start_fn);
}

}  // namespace lifecycle
