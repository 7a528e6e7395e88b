// sampler: the sampling handler and the sampler's life (start, fork, exec,
// stop); the per-thread timers' slots are sampler_slots.h's, the stacks go
// to stack_table.h. See sampler.h for the signal contract.
#include "sampler.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>

#include "arch.h"
#include "errline.h"
#include "fsroot.h"
#include "own_signal.h"
#include "sandbox.h"
#include "sampler_slots.h"
#include "stack_table.h"
#include "sys.h"
#include "stackwalk.h"

namespace sampler {

using namespace slots;


bool running() { return g.enabled.load(std::memory_order_relaxed); }

uint64_t period_ns() { return g.period_ns; }

bool owns(const void* v) {
  return g.slots && v >= static_cast<const void*>(g.slots) && v < static_cast<const void*>(g.slots + kMaxSlots);
}

namespace {
// A sample's whole stack, called where there is room for the walk and its
// 1 KiB of frames (sampler.h).
struct Walk {
  void* uc;
  int32_t tid;
  uint32_t serial;
  uint64_t n, w;
  uint32_t ref;
};
__attribute__((noinline)) void add_walked(void* p) {
  auto* a = static_cast<Walk*>(p);
  uint64_t pcs[kMaxDepth];
  bool cut = false;
  int depth = stackwalk::from_signal(a->uc, pcs, kMaxDepth, &cut);
  if (cut) g.cut.fetch_add(1, std::memory_order_relaxed);
  a->ref = g_table.add(pcs, uint32_t(depth), a->tid, a->serial, 0, a->n, a->w);
}
}  // namespace

void on_timer(siginfo_t* si, void* uc) {
  sandbox::OwnCalls own;
  g.in_flight.fetch_add(1);
  Slot* s = static_cast<Slot*>(si->si_value.sival_ptr);
  int32_t tid = int32_t(sys::gettid());
  // A stale signal (its slot ended or went to another thread) is ignored.
  // During a fork the sample is taken as any other: the tables are the
  // parent's (the child maps its own), and a sample dropped there left its
  // CPU -- the kernel copying the address space, the allocator's fork
  // handlers -- to the next sample, wherever the thread was by then (0.69 s
  // of a forking server's fork time on a function that ran 0.1 s).
  if ((g.enabled.load() || forking()) && s->state.load(std::memory_order_acquire) == kLive &&
      s->tid.load(std::memory_order_acquire) == tid) {
    uint64_t n = 1 + uint64_t(si->si_overrun > 0 ? si->si_overrun : 0);
    // Weighted by the thread's own clock since its previous sample: the
    // kernel delivers at its tick, later than the expiry and by varying
    // amounts, and the first expiry is a random part of a period.
    uint64_t cpu = sys::now_ns(CLOCK_THREAD_CPUTIME_ID);
    uint64_t w = cpu > s->last_cpu ? cpu - s->last_cpu : 0;
    if (cpu > s->last_cpu) s->last_cpu = cpu;
    // Under the name the thread has now (one prctl): a thread that renamed
    // itself, or was renamed, since its last sample goes on under a new serial.
    Walk a = {uc, tid, g_table.serial_now(&s->serial, &g.serials, tid), n, w, 0};
    if (!stackwalk::cramped(uc)) {
      add_walked(&a);
    } else if (!stackwalk::elsewhere(uc, add_walked, &a)) {
      // Nowhere with room: the interrupted instruction alone, in as little stack as can be.
      uint64_t pc = arch::pc(uc) | stackwalk::kExact;
      a.ref = g_table.add(&pc, 1, tid, s->serial, 0, n, w);
    }
    if (a.ref) s->last = a.ref;
    s->delivered += n;
    errline::at_sample();  // a pipe's stderr duplicate past its grace is let go
    g.signals.fetch_add(1, std::memory_order_relaxed);
    g.expirations.fetch_add(n, std::memory_order_relaxed);
  }
  g.in_flight.fetch_sub(1);
}

void on_lost_timer(const siginfo_t* si) {
  Slot* s = static_cast<Slot*>(si->si_value.sival_ptr);
  if (!g.enabled.load() || s->state.load() != kLive || s->tid.load() != int32_t(sys::gettid()) || !s->last)
    return;  // with no stack yet, the thread's end credits these expirations
  // Its CPU is the next sample's, or the thread's end's, by the clock.
  uint64_t n = 1 + uint64_t(si->si_overrun > 0 ? si->si_overrun : 0);
  s->delivered += n;
  g.expirations.fetch_add(n, std::memory_order_relaxed);
  g_table.add_to(s->last, n, 0);
}

bool start(uint32_t hz, std::string* err) {
  if (!map_tables(err)) return false;
  g.period_ns = 1000000000ull / hz;
  g.timer_quota = timer_quota();
  if (pthread_key_create(&g.key, on_thread_exit) != 0) {
    *err = "cannot create a thread key for the CPU timers";
    return false;
  }
  g.enabled.store(true);
  if (!arm_self(err)) return false;
  arm_existing_threads();
  return true;
}

namespace {
// The forking thread's start routine, read before the fork: the child's
// copy of its slot is zeroed (renew_tables).
__thread uint64_t t_fork_start_fn;
}  // namespace

void quiesce_for_fork() {
  // No new thread is armed while forks are under way (a timer the child
  // would not own); samples go on (on_timer).
  if (g_forks.fetch_add(1) == 0) g_was_enabled_at_fork.store(g.enabled.exchange(false));
  Slot* me = g_table.mapped() ? static_cast<Slot*>(pthread_getspecific(g.key)) : nullptr;
  t_fork_start_fn = me >= g.slots && me < g.slots + kMaxSlots ? me->start_fn : 0;
}

void resume_after_fork_in_parent() {
  if (g_forks.fetch_sub(1) == 1 && g_was_enabled_at_fork && !g_stopped.load()) g.enabled.store(true);
}

void reset_after_fork() {
  g.in_flight.store(0);
  g_forks.store(0);
  g_stopped.store(false);
  if (!g_table.mapped()) return;
  // Timers are not inherited by fork and the samples so far are the
  // parent's: the child starts from empty tables, with one thread, whose
  // start routine (or main) is still where its CPU goes without a sample.
  // Renewed even when sampling was off at the fork (a sandbox forbade it):
  // the kernel zeroed the tables, and their counts must go with them.
  const uint64_t start_fn = t_fork_start_fn;
  std::string err;
  if (!renew_tables(&err)) {
    g.enabled.store(false);
    return;
  }
  if (!g_was_enabled_at_fork) return;
  g.live_timers.store(0);  // timers are not inherited
  // Under the parent's seccomp filter, which forbade the timers: empty
  // tables, nothing armed, and a stop with nothing to delete (the parent's
  // timer ids may be the child program's own by now).
  if (sandbox::running_forbidden()) {
    g_stopped.store(true);
    return;
  }
  g.enabled.store(true);
  // The user's queued signals are per user, and the parent keeps its own
  // timers: each child reads what is left (/proc/self/status), so that
  // many children never take the program's last slots.
  g.timer_quota = timer_quota();
  // The child's thread clock started at the fork: what it used before its
  // timer (the kernel's return from fork, the first copy-on-write faults,
  // the shim's reset of the child: 3-4 ms of a 9 ms child on a loaded
  // machine, measured) is credited at the fork's caller, as a new thread's
  // start-up is at its start routine, not lost.
  uint64_t born[64];
  int n = stackwalk::room_here() ? stackwalk::here(born, 64) : 0;
  arm_self(&err, start_fn, born, n);
}

void resume() {
  if (!g_table.mapped() || g.enabled.load()) return;
  g_stopped.store(false);
  for (uint32_t i = 0, n = used_slots(); i < n; ++i) {
    uint32_t st = g.slots[i].state.load();
    if (st == kDead || st == kStopped) release(&g.slots[i]);
  }
  g.enabled.store(true);
  arm_existing_threads();
}

void thread_begin(void* start_fn) {
  if (!running() || pthread_getspecific(g.key)) return;
  if (Slot* s = arm(sys::gettid(), reinterpret_cast<uint64_t>(start_fn), true)) pthread_setspecific(g.key, s);
}

void main_begins(void* main_fn) {
  if (!running()) return;
  Slot* s = static_cast<Slot*>(pthread_getspecific(g.key));
  if (s && s->tid.load() == int32_t(sys::gettid()) && !s->start_fn) s->start_fn = reinterpret_cast<uint64_t>(main_fn);
}

void stop() {
  // Sampling is off during a fork (no new thread armed), but the stop must
  // still end it: a stop that found it off returned, and the fork's end
  // turned sampling back on after the stop.
  if (g_stopped.exchange(true)) return;
  if (!g.enabled.exchange(false) && !(g_forks.load() > 0 && g_was_enabled_at_fork.load())) return;
  // A slot claimed after this read is armed after `enabled` went false,
  // and arm() itself disarms it.
  const uint32_t n = used_slots();
  for (uint32_t i = 0; i < n; ++i) disarm(&g.slots[i], kStopped);
  wait_in_flight();
  for (uint32_t i = 0; i < n; ++i) {
    Slot& s = g.slots[i];
    if (s.state.load() != kStopped) continue;
    int32_t tid = s.tid.load();
    record_comm(s.serial, tid);
    uint64_t cpu = sys::now_ns(thread_clock(tid));
    if (cpu) credit(&s, cpu);  // 0: the thread is gone (its clock with it)
  }
}

void for_each(void (*fn)(const Stack&, void*), void* arg) { g_table.for_each(fn, arg); }

void for_each_since(uint64_t* cursor, void (*fn)(const Stack&, void*), void* arg) {
  g_table.for_each_since(cursor, fn, arg);
}

void release_table() { g_table.release_pages(); }

Stats stats() {
  return {g.signals.load(),        g.expirations.load(),         g.credited.load(),
          g.credited_nanos.load(), g_table.dropped(),       g_table.dropped_weight(),
          g.threads.load(),        g.timer_failures.load(),     g.cut.load()};
}

std::string thread_name(uint32_t serial) { return g_table.name(serial); }

void record_names() {
  if (!g.slots) return;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    Slot& s = g.slots[i];
    if (s.state.load(std::memory_order_acquire) != kLive) continue;
    int32_t tid = s.tid.load(std::memory_order_acquire);
    if (tid > 0) record_comm(s.serial, tid);
  }
}

}  // namespace sampler
