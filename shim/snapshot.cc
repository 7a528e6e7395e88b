// snapshot: the worker thread, its requests and its halt; see snapshot.h.
// What it does is in snapshot_jobs.h.
#include "snapshot.h"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "errline.h"
#include "freeze.h"
#include "lifecycle.h"
#include "memlog.h"
#include "peak.h"
#include "recover.h"
#include "sandbox.h"
#include "shim_thread.h"
#include "snapshot_jobs.h"
#include "stackwalk.h"
#include "symbolize.h"
#include "sys.h"

namespace snapshot {
namespace {

constexpr uint64_t kNever = ~uint64_t(0);
constexpr uint64_t kPollNs = 1000000000ull;  // the trigger file, at most once a second
constexpr uint64_t kIdleWaitNs = 3600000000000ull;

struct State {
  const config::Config* cfg;
  bool resident;                  // a feature needs the worker from setup
  // Requests: a signal's flag, and a word every request bumps (the worker
  // waits on it).
  std::atomic<bool> signal_asked;
  volatile uint32_t word;
  // Which worker may run: a new generation at each halt, and the process
  // it runs in (a fork child has none).
  std::atomic<uint32_t> gen;
  std::atomic<int> pid;
  std::atomic<int> tid;           // the worker's thread, the last started
  std::atomic<bool> starting;
  bool had_worker;                // for an exec that fails
  volatile uint32_t busy;         // futex: a job runs
  // The worker's schedule (CLOCK_MONOTONIC ns), touched only by it.
  uint64_t start_mono, start_real_s;
  uint64_t next_interval, next_poll, next_mem, next_peak;
};
State g;  // zero-initialised: no dynamic initialiser (DESIGN "Globals")
__thread bool t_worker;

int raw_pid() { return int(syscall(SYS_getpid)); }

void bump() {
  __atomic_add_fetch(&g.word, 1, __ATOMIC_SEQ_CST);
  sys::futex_wake(&g.word);
}

uint64_t mem_period_ns() { return g.cfg->mem_millihz ? 1000000000000ull / g.cfg->mem_millihz : 0; }

void schedule_from(uint64_t now) {
  g.next_interval = g.cfg->interval_ms ? now + g.cfg->interval_ms * 1000000ull : kNever;
  g.next_poll = g.cfg->snapshot_trigger ? now + kPollNs : kNever;
  g.next_mem = mem_period_ns() ? now + mem_period_ns() : kNever;
  g.next_peak = 0;
}

uint64_t next_due() {
  uint64_t due = g.next_interval;
  if (g.next_poll < due) due = g.next_poll;
  if (g.next_mem < due) due = g.next_mem;
  if (peak::asked() && g.next_peak < due) due = g.next_peak;
  if (g.signal_asked.load()) due = 0;
  return due;
}

// One round of whatever is due, in the worker, inside its recovery point.
void round(void*) {
  uint64_t now = sys::now_ns(CLOCK_MONOTONIC);
  if (g.signal_asked.exchange(false)) snapshot_jobs::numbered("signal");
  if (now >= g.next_poll) {
    g.next_poll = now + kPollNs;
    if (snapshot_jobs::trigger_touched(g.start_real_s)) snapshot_jobs::numbered("trigger file");
  }
  if (now >= g.next_interval) {
    uint64_t period = g.cfg->interval_ms * 1000000ull;
    // Behind by more than a period (a long write, a stopped process): the
    // next one a period from now, not a burst.
    g.next_interval = g.next_interval + period > now ? g.next_interval + period : now + period;
    snapshot_jobs::numbered("interval");
  }
  if (peak::asked() && now >= g.next_peak) g.next_peak = snapshot_jobs::peak(now);
  if (now >= g.next_mem) {
    g.next_mem = now + mem_period_ns();
    snapshot_jobs::mem_row("tick");
  }
}

bool job(uint32_t mine) {
  __atomic_store_n(&g.busy, 1, __ATOMIC_SEQ_CST);
  // A halt that came before busy was set is seen here; one that comes
  // after waits for busy to clear.
  if (g.gen.load() != mine) {
    __atomic_store_n(&g.busy, 0, __ATOMIC_SEQ_CST);
    sys::futex_wake(&g.busy);
    return false;
  }
  const char* why = nullptr;
  if (lifecycle::active() && !recover::run(round, nullptr, &why))
    errline::line((std::string("error: the snapshot worker's work ended early: ") + why).c_str());
  __atomic_store_n(&g.busy, 0, __ATOMIC_SEQ_CST);
  sys::futex_wake(&g.busy);
  return true;
}

void enter(void*) {
  shim_thread::enter_allocator();
  symbolize::load_libdw(nullptr);  // now, not inside a snapshot's stop-like write (setup.cc)
}

void* worker(void* arg) {
  sandbox::OwnCalls own;  // every call on this thread is the shim's
  uint32_t mine = uint32_t(reinterpret_cast<uintptr_t>(arg));
  t_worker = true;
  g.tid.store(sys::gettid());
  freeze::exempt(true);
  // Its waits (jemalloc's arena, libdw's reads) and allocations are the
  // shim's, not the program's.
  engine::quiet_thread();
  prctl(PR_SET_NAME, "profshim-snap", 0, 0, 0);
  const char* why = nullptr;
  if (!recover::run(enter, nullptr, &why)) return nullptr;
  while (g.gen.load() == mine) {
    uint32_t seen = __atomic_load_n(&g.word, __ATOMIC_SEQ_CST);
    uint64_t now = sys::now_ns(CLOCK_MONOTONIC), due = next_due();
    if (due > now) {
      uint64_t wait = due == kNever || due - now > kIdleWaitNs ? kIdleWaitNs : due - now;
      sys::futex_wait(&g.word, seen, wait);
      continue;
    }
    if (!job(mine)) break;
  }
  return nullptr;
}

bool start_worker() {
  int me = raw_pid();
  if (g.pid.load() == me) return true;
  if (g.starting.exchange(true)) return false;
  uint32_t mine = g.gen.load();
  g.tid.store(0);  // the new thread's, once it runs
  bool ok = g.pid.load() == me || shim_thread::spawn(worker, reinterpret_cast<void*>(uintptr_t(mine)));
  if (ok) {
    g.pid.store(me);
    g.had_worker = true;
  }
  g.starting.store(false);
  return ok;
}

// From the allocation path (peak.h): the worker, started here if there is
// none yet. Not from a vfork child (it shares the parent's memory) nor
// inside a signal handler (pthread_create could meet its own locks held).
bool wake_for_peak() {
  if (!lifecycle::active() || lifecycle::in_vfork_child()) return false;
  if (g.pid.load(std::memory_order_relaxed) != raw_pid()) {
    if (stackwalk::calling_context() != stackwalk::kNotInHandler || !start_worker()) return false;
  }
  bump();
  return true;
}

void begin_image(uint64_t start_mono_ns) {
  g.start_mono = start_mono_ns;
  const uint64_t real = sys::now_ns(CLOCK_REALTIME), mono = sys::now_ns(CLOCK_MONOTONIC);
  const uint64_t start_real = real - (mono > start_mono_ns ? mono - start_mono_ns : 0);
  g.start_real_s = real / 1000000000ull;
  g.signal_asked.store(false);
  g.pid.store(0);
  g.starting.store(false);
  g.had_worker = false;
  __atomic_store_n(&g.busy, 0, __ATOMIC_SEQ_CST);
  schedule_from(start_mono_ns);
  snapshot_jobs::begin(g.cfg, start_real);
  memlog::begin(start_mono_ns);
  if (peak::on()) peak::begin(start_mono_ns);
}

}  // namespace

bool setup(const config::Config* cfg, uint64_t start_mono_ns, std::string* err) {
  g.cfg = cfg;
  g.resident = cfg->interval_ms || cfg->snapshot_signal || cfg->snapshot_trigger || cfg->mem_millihz;
  // The hook on jemalloc's unwind also carries the stacks of C called from
  // Go on to their goroutines: installed even with no peak file.
  if (cfg->heap_sample) {
    const char* why = nullptr;
    // Refused with no peak file asked for: stacks of C from Go end at the
    // cgo call, nothing worse.
    if (!peak::setup(cfg->peak_floor, cfg->peak_after_ms, wake_for_peak, &why) && cfg->peak_floor) {
      *err = why;
      return false;
    }
  }
  begin_image(start_mono_ns);
  if (g.resident && !start_worker()) {
    *err = "cannot start the snapshot worker thread (PROFILE_INTERVAL, PROFILE_SNAPSHOT_*, PROFILE_MEM_HZ)";
    return false;
  }
  return true;
}

void after_fork_in_child(uint64_t start_mono_ns) {
  if (!g.cfg) return;
  g.gen.fetch_add(1);  // the parent's worker is not here
  begin_image(start_mono_ns);
  if (g.resident) start_worker();
}

void resume() {
  if (g.cfg && (g.resident || g.had_worker)) {
    g.pid.store(0);
    start_worker();
  }
}

void on_signal() {
  g.signal_asked.store(true);
  bump();
}

bool halt(uint64_t deadline_mono_ns) {
  if (!g.cfg || g.pid.load() != raw_pid()) return !g.cfg || !__atomic_load_n(&g.busy, __ATOMIC_SEQ_CST);
  g.pid.store(0);
  g.gen.fetch_add(1);
  bump();
  uint64_t now = sys::now_ns(CLOCK_MONOTONIC);
  uint64_t until = now + (deadline_mono_ns > now ? (deadline_mono_ns - now) / 2 : 0);
  while (__atomic_load_n(&g.busy, __ATOMIC_SEQ_CST) && now < until) {
    sys::futex_wait(&g.busy, 1, until - now);
    now = sys::now_ns(CLOCK_MONOTONIC);
  }
  return !__atomic_load_n(&g.busy, __ATOMIC_SEQ_CST);
}

void at_stop(const engine::Part* final_heap, summary::Figures* f) { snapshot_jobs::settle(final_heap, f); }

Apart::Apart() : paused(false) {
  if (!lifecycle::active() || lifecycle::in_vfork_child() || g.pid.load() != raw_pid()) return;
  // A job that outlasts the wait keeps its thread: the call fails as it
  // would have, and no second worker starts beside it after.
  paused = halt(sys::now_ns(CLOCK_MONOTONIC) + 2000000000ull);
  if (!paused) return;
  // Gone from the thread group, as the kernel counts it, within 200 ms (a
  // worker just started may not have run yet: its tid comes first).
  for (int i = 0; i < 200; ++i) {
    const int tid = g.tid.load();
    if (tid > 0 && syscall(SYS_tgkill, raw_pid(), tid, 0) != 0) break;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, nullptr);
  }
}

Apart::~Apart() {
  const int saved = errno;  // the call's own
  if (paused && lifecycle::active()) resume();
  errno = saved;
}

bool on_worker() { return t_worker; }

void worker_crashed() {
  __atomic_store_n(&g.busy, 0, __ATOMIC_SEQ_CST);
  sys::futex_wake(&g.busy);
}

}  // namespace snapshot
