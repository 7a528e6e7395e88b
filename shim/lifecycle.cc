// lifecycle: setup, the state machine, the stop thread and the bounded
// stop; see lifecycle.h.
#include "lifecycle.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "atomic_file.h"
#include "config.h"
#include "finish.h"
#include "heap.h"
#include "real.h"
#include "sampler.h"
#include "symbolize.h"
#include "sys.h"

namespace lifecycle {
namespace {

enum State : int { kInert, kRunning, kStopping, kDone };

std::atomic<int> g_state{kInert};
// Function-local statics: our constructor may run before this file's C++
// static initializers, which would otherwise reset what setup() filled in.
config::Config& cfg() {
  static config::Config c;
  return c;
}
finish::Context& ctx() {
  static finish::Context c;
  return c;
}
// Futex words: the stop thread sleeps on g_request; stoppers sleep on g_done.
volatile uint32_t g_request = 0;
volatile uint32_t g_done = 0;

[[noreturn]] void fail(const std::string& why) {
  sys::line(("error: " + why).c_str());
  // Before main: nothing of the program's has run, so nothing to flush.
  syscall(SYS_exit_group, 78);
  __builtin_unreachable();
}

void* stop_thread(void*) {
  prctl(PR_SET_NAME, "profshim-stop", 0, 0, 0);
  heap::set_thread_active(false);
  while (!__atomic_load_n(&g_request, __ATOMIC_ACQUIRE)) {
    sys::futex_wait(&g_request, 0, 1000000000ull);
    sys::stderr_poll();
  }
  finish::run(ctx());
  g_state.store(kDone);
  __atomic_store_n(&g_done, 1, __ATOMIC_RELEASE);
  sys::futex_wake(&g_done);
  return nullptr;
}

// With every signal blocked, so that no signal meant for the program is
// ever handled on the shim's thread.
std::string spawn_stop_thread() {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int rc = real::pthread_create()(&t, &attr, stop_thread, nullptr);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return rc == 0 ? "" : std::string("cannot start the stop thread: ") + strerror(rc);
}

void after_fork_in_child() {
  // The stop thread and the CPU timers do not survive fork; until the child
  // profiles itself as its own image (a later change), it writes nothing
  // and never waits for a thread it does not have.
  if (g_state.load() == kInert) return;
  sampler::abandon_after_fork();
  g_state.store(kInert);
}

void setup() {
  std::string err = config::parse([](const char* n) -> const char* { return getenv(n); }, &cfg());
  if (!err.empty()) fail(err);
  if (!cfg().active) {
    heap::set_active(false);
    return;
  }
  sys::stderr_init();
  ctx().cfg = &cfg();
  ctx().stem = cfg().name;
  ctx().start_mono_ns = sys::now_ns(CLOCK_MONOTONIC);
  ctx().start_real_ns = sys::now_ns(CLOCK_REALTIME);
  if (!(err = atomic_file::ensure_dir(cfg().dir)).empty()) fail("PROFILE_DIR: " + err);
  if (!symbolize::load_libdw(&err)) fail(err);
  if (cfg().heap_sample) {
    if (!heap::available(&err) || !heap::start(cfg().heap_lg_sample, &err)) fail(err);
  } else {
    heap::set_active(false);
  }
  if (cfg().cpu_hz && !sampler::start(cfg().cpu_hz, &err)) fail(err);
  if (!(err = spawn_stop_thread()).empty()) fail(err);
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
  g_state.store(kRunning);
}

__attribute__((constructor)) void init() {
  // The shim's own setup allocations are not the program's.
  heap::set_thread_active(false);
  setup();
  heap::set_thread_active(true);
}

}  // namespace

bool active() { return g_state.load(std::memory_order_relaxed) == kRunning; }

void stop(const char* how) {
  int s = kRunning;
  if (g_state.compare_exchange_strong(s, kStopping)) {
    ctx().how = how;
    ctx().stop_mono_ns = sys::now_ns(CLOCK_MONOTONIC);
    __atomic_store_n(&g_request, 1, __ATOMIC_RELEASE);
    sys::futex_wake(&g_request);
  } else if (s != kStopping) {
    return;
  }
  uint64_t deadline = sys::now_ns(CLOCK_MONOTONIC) + cfg().stop_timeout_ms * 1000000ull;
  for (;;) {
    if (__atomic_load_n(&g_done, __ATOMIC_ACQUIRE)) return;
    uint64_t now = sys::now_ns(CLOCK_MONOTONIC);
    if (now >= deadline) break;
    sys::futex_wait(&g_done, 0, deadline - now);
  }
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    sys::linef("error: the stop did not finish writing within %.1f s; giving up, the process ends "
               "as it would have",
               double(cfg().stop_timeout_ms) / 1000.0);
}

}  // namespace lifecycle
