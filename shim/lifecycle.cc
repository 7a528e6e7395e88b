// lifecycle: setup, the state machine and where the stop runs; see
// lifecycle.h.
#include "lifecycle.h"
#include "lifecycle_core.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "atomic_file.h"
#include "config.h"
#include "engine.h"
#include "errline.h"
#include "finish.h"
#include "forks.h"
#include "freeze.h"
#include "fsroot.h"
#include "heap.h"
#include "image.h"
#include "own_signal.h"
#include "sampler.h"
#include "sandbox.h"
#include "sigmask.h"
#include "signals.h"
#include "snapshot.h"
#include "stackwalk.h"
#include "stop_runner.h"
#include "symbolize.h"
#include "sys.h"

namespace lifecycle {
namespace {

std::atomic<bool> g_main_exited{false};
std::atomic<long> g_threads{0};      // threads started through the shim, alive
std::atomic<int> g_execs{0};         // execs under way (each stopped the image)
std::atomic<bool> g_stop_as_name{false};  // this image's stop writes the root's NAME.*
pthread_key_t g_thread_key;
volatile uint32_t g_done = 0;        // futex word: the stop finished
const config::Config* g_cfg;  // setup's (setup.cc), never destroyed

}  // namespace

namespace core {

std::atomic<int> g_state{kInert};
std::atomic<bool> g_gave_up{false};

const config::Config& cfg() { return *g_cfg; }
// Built on first use (our constructor may run before this file's C++
// initialisers would) and never destroyed: after a stop that timed out, the
// stop thread may still read it while exit() runs the atexit destructors.
finish::Context& ctx() {
  static finish::Context* c = new finish::Context();
  return *c;
}

pid_t raw_getpid() { return pid_t(syscall(SYS_getpid)); }

// A vfork child runs in its parent's memory: it must not stop, nor touch
// the parent's state. Under a filter that kills getpid (or makes it fail),
// asking would kill the process or tell nothing; everything the answer
// guards was given up when the filter went in, so the answer that skips it
// all is the safe one. So is it for a filter the shim did not see.
bool vfork_child() {
  if (sandbox::getpid_forbidden()) return true;
  return raw_getpid() != image::pid();
}

bool claim_stop(const char* how, const std::string* stem) {
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

}  // namespace core

using namespace core;

namespace {

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
  reset_fatal_retries();
  atomic_file::reset();
}

// A stop in the normal course of the program (stop_runner.h says where it
// runs), waited for with a bound.
void normal_stop(const char* how, const std::string* stem = nullptr) {
  // Under a filter that forbids the stop's calls: not even a look at the
  // process (its thread count is a /proc read).
  if (sandbox::stop_forbidden()) return;
  sandbox::OwnCalls own;
  sandbox::say_trapped();
  const stackwalk::Context where = stackwalk::calling_context();
  {
    stop_runner::Place place(where != stackwalk::kNotInHandler);
    if (claim_stop(how, stem)) {
      if (where == stackwalk::kHandlerOverUnsafeCode) {
        // The program's signal handler interrupted its own malloc and called
        // exit(): the allocator's state on this thread is half-changed, and
        // the stop allocates. No profile rather than a hang.
        finish::report_failure(ctx(), "exit was called in a signal handler that interrupted the allocator");
        mark_done();
      } else {
        stop_runner::normal(ctx(), place, mark_done);
      }
    }
  }
  if (g_state.load() != kInert) {
    wait_done();
    die_of_deferred();
  }
}

// A fork that succeeds leaves errno as it was, in parent and child: the
// handlers' own failed calls (a hand-over file's unlink that finds none)
// must not show there.
void before_fork() {
  if (g_state.load() != kRunning) return;
  const int saved = errno;
  symbolize::libdw_before_fork();
  forks::before_fork();
  engine::each_on(&engine::Engine::before_fork);
  errno = saved;
}

void after_fork_in_parent() {
  const int saved = errno;
  symbolize::libdw_after_fork_in_parent();
  if (g_state.load() == kRunning) engine::each_on(&engine::Engine::after_fork_in_parent);
  errno = saved;
}

void after_fork_in_child_work();

// The child of fork profiles itself from here on, as its own image.
void after_fork_in_child() {
  const int saved = errno;
  after_fork_in_child_work();
  errno = saved;
}

void after_fork_in_child_work() {
  own_signal::after_fork();
  symbolize::libdw_after_fork_in_child();
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
  fatal_after_fork();
  freeze::after_fork();
  forks::after_fork_in_child();
  // The parent's seccomp filter is the child's: what it forbade stays off,
  // over fresh tables (the parent's samples are the parent's).
  engine::each_on(&engine::Engine::after_fork_in_child);
  begin_image(true);
  snapshot::after_fork_in_child(ctx().start_mono_ns);
}

// The key's value is the thread's alternate stack if we gave it one, else
// a non-null marker (a destructor runs only for a non-null value).
void on_thread_end(void* v) {
  sandbox::OwnCalls own;
  if (v != reinterpret_cast<void*>(1) && !sandbox::running_forbidden()) signals::release_altstack(v);
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
const std::string& profile_dir() { return core::cfg().dir; }

void stop(const char* how) {
  if (g_state.load() == kInert || vfork_child()) return;
  int saved = errno;  // the program's atexit handlers may look at it
  normal_stop(how);
  errno = saved;
}

char* const* before_exec(char* const envp[], const char* path, const char* argv0) {
  int state = g_state.load();
  if (state == kInert) return envp;
  if (vfork_child()) {
    // The mask and the shim's signal's disposition the new program gets
    // are the calling thread's own (a vfork child's are its own too).
    own_signal::before_exec();
    if (!sandbox::getpid_forbidden()) return envp;
    // Under a filter that kills getpid this may be the image itself (it
    // cannot be told): the image it execs must know the filter is in, or it
    // asks getpid at its start. Nothing else of this image's is touched.
    sigmask::before_exec();
    char** env = image::exec_env(envp, false);
    return env ? env : envp;
  }
  g_execs.fetch_add(1);
  // Under a seccomp filter the exec'd image stays inert (its marker says
  // so, image.h): this one is the last, and writes NAME.* if the root.
  const bool sandboxed = sandbox::stop_forbidden() || sandbox::running_forbidden();
  bool successor = image::env_profiles(envp, path, argv0) && !sandboxed;
  // The root's image before an exec is not its final one when what it execs
  // profiles too: that one writes NAME.*, this one NAME.PROG.PID.*.
  const std::string pre_exec = image::stem(false);
  normal_stop("exec", image::root() && successor ? &pre_exec : nullptr);
  sigmask::before_exec();
  // After the stop: its watchdog is the shim's signal.
  own_signal::before_exec();
  if (!successor && !sandboxed) return envp;
  // Another path (exit on another thread, a signal) stopped this image first,
  // as the root's final one, under NAME: the image this exec starts must not
  // write NAME.* over it, so it is not the root.
  char** env = image::exec_env(envp, !g_stop_as_name.load());
  return env ? env : envp;
}

bool in_vfork_child() { return g_state.load() != kInert && vfork_child(); }

void before_close(unsigned lo, unsigned hi) {
  if (in_vfork_child()) return;
  errline::before_close(lo, hi);
  fsroot::before_close(lo, hi);
}

void exec_failed(char* const envp[], char* const* env) {
  if (env != envp) free(const_cast<char**>(env));
  if (g_state.load() == kInert) return;
  own_signal::after_failed_exec();
  if (vfork_child()) {
    if (sandbox::getpid_forbidden()) sigmask::after_failed_exec();
    return;
  }
  sigmask::after_failed_exec();
  // The last exec under way to fail resumes the image, once.
  // Not after a stop that gave its tables back (finish.h, released): an
  // exit's, say, with an atexit handler's exec failing.
  if (g_execs.fetch_sub(1) != 1 || g_state.load() != kDone || g_gave_up.load() || sandbox::stop_forbidden() ||
      ctx().released.load())
    return;
  // Same image, still running: profile on, and its final stop writes again.
  begin_image(false);
  forks::reopen();
  engine::each_on(&engine::Engine::resume, /*backwards=*/true);
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

void sandboxed(const char* why, bool stop) {
  if (g_state.load() != kRunning || vfork_child()) return;
  char line[320];
  if (stop) {
    // Done, as far as every stop path is concerned: each finds the stop
    // claimed and over, and lets the program end as it would have.
    int running = kRunning;
    if (!g_state.compare_exchange_strong(running, kStopping)) return;
    // A snapshot under way finishes while its calls are still allowed.
    snapshot::halt(sys::now_ns(CLOCK_MONOTONIC) + 2000000000ull);
    mark_done();
    // Its forked children's hand-over ends too (they write their own
    // files, as far as the filter lets them); what they handed over stays.
    const std::string kept = forks::give_up();
    snprintf(line, sizeof line, "%s, which the stop needs: this process writes no profile%s", why, kept.c_str());
  } else {
    snprintf(line, sizeof line, "%s, which sampling needs: CPU and waits are profiled up to here", why);
  }
  engine::each_on(&engine::Engine::sandboxed);
  errline::line(line);
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

void root_changing() {
  // A vfork child shares the parent's memory but not its descriptors: the
  // parent would note a root it does not hold, and a dlopen there would
  // change the parent's loader state. The child execs next, into the new
  // root.
  if (!profiling() || in_vfork_child()) return;
  fsroot::before_chroot();
  // libdw and the libraries it needs are found by path: inside the new
  // root they are not, and the stop would name nothing.
  const bool was = heap::swap_thread_active(false);
  symbolize::load_libdw(nullptr);  // a failure is the stop's to report, as a missing symbol
  heap::set_thread_active(was);
}

void thread_create_failed() { g_threads.fetch_sub(1); }

void thread_ending() { fatal_thread_ending(); }

void thread_started(uint64_t creator_view, void* start_fn) {
  sandbox::OwnCalls own;
  sandbox::say_trapped();
  // Under a filter that forbids the shim's per-thread calls, none are made.
  void* alt = sandbox::running_forbidden() ? nullptr : signals::ensure_altstack();
  pthread_setspecific(g_thread_key, alt ? alt : reinterpret_cast<void*>(1));
  sigmask::thread_begin(creator_view);
  if (!sandbox::running_forbidden()) sampler::thread_begin(start_fn);
}

}  // namespace lifecycle
