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
#include "freeze.h"
#include "gzip.h"
#include "heap.h"
#include "image.h"
#include "own_signal.h"
#include "real.h"
#include "recover.h"
#include "sampler.h"
#include "session_env.h"
#include "sigmask.h"
#include "signals.h"
#include "stack.h"
#include "symbolize.h"
#include "sys.h"
#include "stackwalk.h"

namespace lifecycle {
namespace {

enum State : int { kInert, kRunning, kStopping, kDone };

constexpr size_t kStopStack = size_t(2) << 20;  // libdw's line tables want ~150 KiB; room to spare
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
__thread bool t_inline_normal_stop;  // this thread runs a normal stop in place, bounded by a timer
__thread bool t_stop_thread;  // this thread is the shim's stop thread

// Built on first use (our constructor may run before this file's C++
// initialisers would) and never destroyed: after a stop that timed out, the
// stop thread may still read them while exit() runs the atexit destructors.
config::Config& cfg() {
  static config::Config* c = new config::Config;
  return *c;
}
finish::Context& ctx() {
  static finish::Context* c = new finish::Context();
  return *c;
}

pid_t raw_getpid() { return pid_t(syscall(SYS_getpid)); }

bool vfork_child() { return raw_getpid() != image::pid(); }

[[noreturn]] void fail(const std::string& why) {
  errline::line(("error: " + why).c_str());
  // Before main: nothing of the program's has run, so nothing to flush.
  syscall(SYS_exit_group, 78);
  __builtin_unreachable();
}

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
  g_state.store(kDone);
  __atomic_store_n(&g_done, 1, __ATOMIC_RELEASE);
  sys::futex_wake(&g_done);
}

// Milliseconds as the seconds a user writes: 10000 -> "10", 280 -> "0.28".
void seconds_text(uint64_t ms, char* out, size_t cap) {
  snprintf(out, cap, "%llu.%03llu", (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000));
  size_t n = strlen(out);
  while (out[n - 1] == '0') out[--n] = 0;
  if (out[n - 1] == '.') out[n - 1] = 0;
}

void run_finish(void*) { finish::run(ctx()); }

// The stop with a way out: a crash or an allocation failure inside it ends
// the stop with one line, not the process.
void finish_guarded(void* = nullptr) {
  const char* why = nullptr;
  if (!recover::run(run_finish, nullptr, &why)) finish::report_failure(ctx(), why);
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

void stop_thread_body(void* altp) {
  // The thread's first calls into the allocator set up its state there, and
  // under memory pressure that is where jemalloc fails (a fault, not NULL):
  // inside the recovery point too.
  heap::set_thread_active(false);
  // Its own arena: a program thread stopped inside malloc may hold its
  // arena's lock, and the stop must not wait for that.
  heap::use_private_arena();
  *static_cast<void**>(altp) = signals::ensure_altstack();  // a fault in the stop reaches recover
  run_finish(nullptr);
}

void* stop_thread(void*) {
  sigmask::Internal inside;
  t_stop_thread = true;
  prctl(PR_SET_NAME, "profshim-stop", 0, 0, 0);
  void* alt = nullptr;
  const char* why = nullptr;
  if (!recover::run(stop_thread_body, &alt, &why)) finish::report_failure(ctx(), why);
  mark_done();
  signals::release_altstack(alt);
  return nullptr;
}

// A thread of the shim's for this stop, every signal blocked but the
// faults (a blocked fault would kill the process outright; ours end the stop
// through recover).
bool spawn_stop_thread() {
  sigset_t mask;
  sigfillset(&mask);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&mask, s);
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  // This runs on the program's thread, and glibc allocates the attribute's
  // mask (and the thread's own bookkeeping): live while the heap is dumped,
  // so not sampled as the program's.
  const bool was = heap::swap_thread_active(false);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, kStopStack);
  pthread_attr_setsigmask_np(&attr, &mask);
  pthread_t t;
  int rc = real::pthread_create()(&t, &attr, stop_thread, nullptr);
  pthread_attr_destroy(&attr);
  heap::set_thread_active(was);
  return rc == 0;
}

void begin_image() {
  finish::Context& c = ctx();
  c.stem = image::stem();
  c.start_mono_ns = sys::now_ns(CLOCK_MONOTONIC);
  c.start_real_ns = sys::now_ns(CLOCK_REALTIME);
  c.reported.store(false);
  __atomic_store_n(&c.deadline_mono_ns, 0, __ATOMIC_RELEASE);
  g_stop_as_name.store(false);
  g_done = 0;
  g_gave_up.store(false);
  g_retries.store(0);
  atomic_file::reset();
}

// A stop in the normal course of the program: on a thread of its own (or,
// if none can be started, here on a fresh stack), waited for with a bound.
void inline_normal_stop(void*) {
  // Bounded by a timer on the shim's signal: past the deadline the stop is
  // abandoned through its recovery point (on_watchdog) and the caller goes on.
  sigset_t ours;
  sigemptyset(&ours);
  sigaddset(&ours, own_signal::number());
  sigmask::unfiltered(SIG_UNBLOCK, &ours, nullptr);
  uint64_t now = sys::now_ns(CLOCK_MONOTONIC), deadline = ctx().deadline_mono_ns;
  int watchdog = own_signal::arm_self(own_signal::kWatchdog, deadline > now ? deadline - now : 1);
  t_inline_normal_stop = true;
  finish_guarded();
  t_inline_normal_stop = false;
  own_signal::disarm(watchdog);
}

void normal_stop(const char* how, const std::string* stem = nullptr) {
  if (claim_stop(how, stem)) {
    stackwalk::Context where = stackwalk::calling_context();
    if (where == stackwalk::kHandlerOverUnsafeCode) {
      // The program's signal handler interrupted its own malloc and called
      // exit(): the allocator's state on this thread is half-changed, and
      // the stop allocates. No profile rather than a hang.
      finish::report_failure(ctx(), "exit was called in a signal handler that interrupted the allocator");
      mark_done();
    } else if (where == stackwalk::kHandler) {
      // Inside a signal handler pthread_create could meet its own locks
      // held (the handler interrupted a thread's start or end): in place.
      if (!stack::run_on_fresh(kStopStack, inline_normal_stop, nullptr))
        finish::report_failure(ctx(), "out of memory (no stack for the stop)");
      mark_done();
    } else if (!spawn_stop_thread()) {
      if (!stack::run_on_fresh(kStopStack, finish_guarded, nullptr))
        finish::report_failure(ctx(), "out of memory (no stack for the stop)");
      mark_done();
    }
  }
  if (g_state.load() != kInert) wait_done();
}

void fatal_stop_body(void*) {
  t_stopping = true;
  // The watchdog's signal must reach this thread: a fatal signal can come
  // inside the shim's own handler (an external SIGRTMAX-4) or a program's
  // handler whose kernel sa_mask holds it (one on its alternate stack).
  sigset_t ours;
  sigemptyset(&ours);
  sigaddset(&ours, own_signal::number());
  sigmask::unfiltered(SIG_UNBLOCK, &ours, nullptr);
  finish::Context& c = ctx();
  uint64_t now = sys::now_ns(CLOCK_MONOTONIC);
  uint64_t quarter = (c.deadline_mono_ns - now) / 4;
  uint64_t freeze_until = now + (quarter < 300000000ull ? quarter : 300000000ull);
  freeze::others(freeze_until, c.deadline_mono_ns + 5000000000ull);
  now = sys::now_ns(CLOCK_MONOTONIC);
  int watchdog = own_signal::arm_self(own_signal::kWatchdog, c.deadline_mono_ns > now ? c.deadline_mono_ns - now : 1);
  finish_guarded();
  own_signal::disarm(watchdog);
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
  begin_image();
  if (cfg().cpu_hz) sampler::reset_after_fork();
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

void setup(void*) {
  std::string err =
      config::parse([](const char* n) -> const char* { return getenv(n); }, &cfg());
  if (!err.empty()) fail(err);
  if (!cfg().active) {
    heap::set_active(false);
    return;
  }
  errline::init();
  if (!(err = atomic_file::ensure_dir(cfg().dir)).empty()) fail("PROFILE_DIR: " + err);
  // Absolute from here on: the program may chdir before it stops (and the
  // session's identity is computed from it).
  if (char* abs = realpath(cfg().dir.c_str(), nullptr)) {
    cfg().dir = abs;
    free(abs);
  }
  session_env::pass_on_absolute(cfg().dir);
  image::setup(&cfg(), raw_getpid());
  // A misspelt variable would be ignored in silence: named once, by the root.
  std::string unknown = config::unknown_vars(environ);
  if (!unknown.empty() && image::root())
    errline::line(("warning: not a profshim variable, ignored: " + unknown + " (see docs/CONFIG.md)").c_str());
  finish::Context& c = ctx();
  c.cfg = &cfg();
  seconds_text(cfg().stop_timeout_ms, c.timeout_text, sizeof c.timeout_text);
  begin_image();
  stackwalk::prime();
  stackwalk::note_unsafe_code();
  // zlib first: libdw needs it too, and whoever loads it first decides its
  // binding (gzip.cc loads it deep-bound).
  if (!gzip::load(&err)) fail(err);
  if (!symbolize::load_libdw(&err)) fail(err);
  if (cfg().heap_sample) {
    if (!heap::available(&err) || !heap::start(cfg().heap_lg_sample, &err)) fail(err);
  } else {
    heap::set_active(false);
  }
  if (!own_signal::install(&err)) fail(err);
  sigmask::setup(own_signal::number());
  if (cfg().cpu_hz && !sampler::start(cfg().cpu_hz, &err)) fail(err);
  signals::install();
  signals::ensure_altstack();  // the main thread's, kept for the process's life
  pthread_key_create(&g_thread_key, on_thread_end);
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
  atexit(at_exit_fallback);
  g_state.store(kRunning);
}

__attribute__((constructor)) void init() {
  real::resolve_all();
  // The shim's own setup allocations are not the program's.
  heap::set_thread_active(false);
  const char* why = nullptr;
  if (!recover::run(setup, nullptr, &why)) fail(std::string("setup failed: ") + why);
  heap::set_thread_active(true);
}

}  // namespace

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
  bool deferred;
};
bool fatal_on_this_stack(int sig, siginfo_t* si, void* uc);
void fatal_call(void* p) {
  auto* c = static_cast<FatalCall*>(p);
  c->deferred = fatal_on_this_stack(c->sig, c->si, c->uc);
}
}  // namespace

bool stop_on_fatal(int sig, siginfo_t* si, void* uc) {
  if (g_state.load() == kInert || vfork_child()) return false;
  bool fault = signals::synchronous_fault(sig, si);
  // A fault inside the stop itself ends the stop, not the process; so does
  // an abort() of a library the stop uses (libdw's and libelf's asserts).
  bool self_abort = sig == SIGABRT && si && si->si_code == SI_TKILL && si->si_pid == raw_getpid();
  if ((fault || self_abort) && recover::active()) recover::escape_from_fault(sig);
  if (t_stop_thread) {
    // The shim's own thread, outside its recovery point (the allocator's
    // thread teardown after a stop that ran out of memory): nothing of the
    // program's runs here, so this thread alone ends, at once, without
    // libc's thread exit (which would call into the allocator again). Any
    // other signal is blocked on this thread.
    finish::report_failure(ctx(), "the stop crashed");
    mark_done();
    syscall(SYS_exit, 0);
  }
  // Another signal in this thread's own fatal stop, outside the stop's
  // recovery: nothing to wait for (it would be waiting for itself).
  if (t_stopping) return false;
  // Everything from here runs on a stack of its own: the handler may be on
  // the program's small alternate stack, and unwinding alone wants more.
  FatalCall c = {sig, si, uc, false};
  if (!stack::run_on_fresh(kStopStack, fatal_call, &c)) {
    if (claim_stop(signal_name(sig))) {
      finish::report_failure(ctx(), "out of memory (no stack for the stop)");
      mark_done();
    }
    return false;
  }
  return c.deferred;
}

namespace {
bool fatal_on_this_stack(int sig, siginfo_t* si, void* uc) {
  bool fault = signals::synchronous_fault(sig, si);
  int state = g_state.load();
  if ((state == kRunning || state == kStopping) && stackwalk::interrupted_in_unsafe_code(uc)) {
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
      t_deferred_sig = sig;
      if (own_signal::arm_self(own_signal::kRetryFatal, kRetryNs) >= 0) return true;
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
    fatal_stop_body(nullptr);
    mark_done();
    return false;
  }
  wait_done();
  return false;
}

}  // namespace

void on_watchdog() {
  // A normal stop run in place (exit() called in a signal handler): past
  // its bound it is abandoned, and the program's exit goes on.
  if (t_inline_normal_stop) recover::fail("it did not finish within PROFILE_STOP_TIMEOUT");
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

void on_retry_fatal(const siginfo_t* si) {
  // One shot: its timer goes. Then the signal, blocked here, pending until
  // this handler returns to where the program now is: the fatal handler
  // meets it there.
  if (si) syscall(SYS_timer_delete, si->si_timerid);
  int sig = g_deferred_sig.load();
  t_deferred_sig = 0;
  if (sig <= 0) return;
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigmask::unfiltered(SIG_BLOCK, &one, nullptr);
  syscall(SYS_tgkill, raw_getpid(), sys::gettid(), sig);
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
  begin_image();
  if (cfg().heap_sample) heap::set_active(true);
  if (cfg().cpu_hz) sampler::resume();
  g_state.store(kRunning);
}

void main_thread_exiting() {
  if (g_state.load() != kRunning || vfork_child()) return;
  // Mark first, then count: a last worker ending in between sees the mark,
  // and the stop is idempotent, so neither order of the two is lost.
  g_main_exited.store(true);
  if (g_threads.load() == 0) stop("pthread_exit from main");
}

void thread_creating() { g_threads.fetch_add(1); }

void thread_create_failed() { g_threads.fetch_sub(1); }

void thread_ending() {
  // A fatal signal this thread deferred, whose retry would come to a thread
  // that is gone: sent again to the process, for a thread that is there.
  if (int sig = t_deferred_sig) {
    t_deferred_sig = 0;
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
