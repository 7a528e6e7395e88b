// sampler: per-thread CPU-time timers and the sampling handler; the stacks
// go to stack_table.h. See sampler.h for the signal contract.
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

#include "errline.h"
#include "fsroot.h"
#include "own_signal.h"
#include "sandbox.h"
#include "stack_table.h"
#include "sys.h"
#include "stackwalk.h"

namespace sampler {
namespace {

constexpr int kMaxDepth = 128;
constexpr uint32_t kMaxSlots = 1u << 14;        // threads alive at once

// kLive: its timer runs. kDead: its thread's end deleted it. kStopped: the
// stop deleted it, and credits its last expirations.
enum SlotState : uint32_t { kFree = 0, kClaimed, kLive, kDead, kStopped };

struct Slot {
  std::atomic<uint32_t> state;
  std::atomic<int32_t> tid;
  timer_t timer;
  // Its entries' serial in the table: a new one each time its name changes
  // (stack_table.h, serial_now), set by its own handler and exit.
  uint32_t serial;
  uint64_t first_cpu;  // the thread's CPU time at its timer's first expiry
  // Written only by the owning thread's handler (and read once its timer
  // is gone): expirations sampled, the thread's CPU time when its last
  // sample was taken (at its arming before any), where that sample went.
  uint64_t delivered;
  uint64_t last_cpu;
  uint32_t last;       // entry index + 1, 0 for none
  uint64_t start_fn;   // its start routine (main for the main thread), 0 if unknown
};

struct State {
  Slot* slots;
  // Slots are claimed from a rotating hint; every slot ever claimed lies
  // below the high-water mark, so the scans (the stop's, a new thread's
  // lookup) cost what was used, not the table's 1 MiB.
  std::atomic<uint32_t> hint, high_water;
  std::atomic<uint32_t> serials;
  std::atomic<uint64_t> signals, expirations, credited, credited_nanos, threads, timer_failures;
  std::atomic<uint64_t> cut;  // samples whose walk stopped at a frame it could not trust
  std::atomic<int> in_flight;
  // Each timer holds one of the user's queued-signal slots for its whole
  // life (the kernel preallocates its signal against RLIMIT_SIGPENDING):
  // the shim takes at most a quarter of what that limit leaves free, so that
  // a program under a small one (ulimit -i) keeps room for its own sigqueue
  // and timers.
  // Threads past it go unsampled, counted in the summary.
  std::atomic<long> live_timers;
  long timer_quota;
  std::atomic<bool> enabled;
  uint64_t period_ns;
  pthread_key_t key;
};
State g;
stack_table::Table g_table;  // the samples: (thread, stack) -> expirations, CPU
// Forks under way (threads may fork at once); sampling comes back when the
// last one is done, if it was on when the first began.
std::atomic<int> g_forks{0};
std::atomic<bool> g_was_enabled_at_fork{false};
// The stop has taken the samples: nothing is added after it, a fork under
// way or not.
std::atomic<bool> g_stopped{false};
bool forking() { return g_forks.load() > 0 && g_was_enabled_at_fork.load() && !g_stopped.load(); }

void* map_zeroed(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// The kernel's per-thread CPU clock id for any tid of this process
// (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) in linux/posix-timers.h).
clockid_t thread_clock(pid_t tid) { return clockid_t((~unsigned(tid) << 3) | 6); }

// At a thread's end or the stop: the CPU it used since its last sample, and
// the expirations it reached (by its CPU time now) that no signal brought,
// to its last sampled stack, or, if it had none, to its start routine.
// The CPU is the thread clock's, not periods: a thread of 3 ms at 100 Hz
// reaches its one random expiry three times in ten, and counting periods
// would give it 10 ms or nothing; its own clock gives it 3 ms every time.
void credit(Slot* s, uint64_t cpu_now) {
  uint64_t missing = 0, nanos = 0;
  if (cpu_now >= s->first_cpu) {
    uint64_t expected = 1 + (cpu_now - s->first_cpu) / g.period_ns;
    if (expected > s->delivered) missing = expected - s->delivered, s->delivered = expected;
  }
  if (cpu_now > s->last_cpu) nanos = cpu_now - s->last_cpu, s->last_cpu = cpu_now;
  if (!missing && !nanos) return;
  g.expirations.fetch_add(missing, std::memory_order_relaxed);
  g.credited.fetch_add(missing, std::memory_order_relaxed);
  g.credited_nanos.fetch_add(nanos, std::memory_order_relaxed);
  if (s->last) {
    g_table.add_to(s->last, missing, nanos);
  } else if (s->start_fn) {
    uint64_t pc = s->start_fn | stackwalk::kExact;
    s->last = g_table.add(&pc, 1, s->tid.load(), s->serial, 0, missing, nanos);
  } else {
    g_table.drop(missing, nanos);
  }
}

uint64_t xorshift(uint64_t x) {
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return x;
}

uint32_t used_slots() { return g.high_water.load(); }

Slot* claim_slot(int32_t tid) {
  uint32_t start = g.hint.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    const uint32_t idx = (start + i) & (kMaxSlots - 1);
    Slot& s = g.slots[idx];
    uint32_t want = kFree;
    if (s.state.compare_exchange_strong(want, kClaimed)) {
      uint32_t hw = g.high_water.load(std::memory_order_relaxed);
      while (hw < idx + 1 && !g.high_water.compare_exchange_weak(hw, idx + 1)) {
      }
      s.tid.store(tid, std::memory_order_release);
      return &s;
    }
  }
  return nullptr;
}

void release(Slot* s) {
  s->tid.store(0, std::memory_order_release);
  s->state.store(kFree, std::memory_order_release);
}

// Deletes the timer exactly once, whoever gets here first (the thread's
// exit destructor or stop()): a second timer_delete could hit a timer id
// the kernel has since handed to the program.
bool disarm(Slot* s, uint32_t to) {
  uint32_t want = kLive;
  if (!s->state.compare_exchange_strong(want, to)) return false;
  timer_delete(s->timer);
  g.live_timers.fetch_sub(1);
  return true;
}

// Arms a timer on tid's CPU clock, first expiry at a random point of the
// first period so that short-lived threads are not biased against.
Slot* arm(pid_t tid, uint64_t start_fn, bool own_exit) {
  Slot* s = claim_slot(int32_t(tid));
  if (!s) {
    g.timer_failures.fetch_add(1);
    return nullptr;
  }
  // The calling thread's own clock by its generic name: a sandbox policy
  // (Chromium's) may let a thread read CLOCK_THREAD_CPUTIME_ID and trap any
  // clock named by a thread id, its own included.
  clockid_t clock = tid == pid_t(sys::gettid()) ? CLOCK_THREAD_CPUTIME_ID : thread_clock(tid);
  uint64_t first = 1 + xorshift(sys::now_ns(CLOCK_MONOTONIC) ^ uint64_t(tid) * 0x9e37) % g.period_ns;
  s->serial = g.serials.fetch_add(1, std::memory_order_relaxed) + 1;
  s->delivered = 0, s->last = 0, s->start_fn = start_fn;
  s->last_cpu = sys::now_ns(clock);
  s->first_cpu = s->last_cpu + first;
  if (own_exit && start_fn && s->last_cpu) {
    // A thread armed from inside itself as it starts: its clock started at
    // its birth, and what it used before this (the shim's own set-up of
    // the thread, its first page faults: 2-13% of a 3 ms thread, measured)
    // is its start routine's, neither lost nor lumped onto the stack of
    // its first sample. Before the timer exists: no sample races this.
    uint64_t pc = start_fn | stackwalk::kExact;
    s->last = g_table.add(&pc, 1, tid, s->serial, 0, 0, s->last_cpu);
    g.credited_nanos.fetch_add(s->last_cpu, std::memory_order_relaxed);
  }
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = own_signal::number();
  sev.sigev_value.sival_ptr = s;
  sev._sigev_un._tid = tid;
  bool over = g.live_timers.fetch_add(1) >= g.timer_quota;
  if (over || timer_create(clock, &sev, &s->timer) != 0) {
    if (over) errno = EAGAIN;
    g.live_timers.fetch_sub(1);
    g.timer_failures.fetch_add(1);
    release(s);
    return nullptr;
  }
  s->state.store(kLive, std::memory_order_release);
  struct itimerspec its;
  its.it_interval = {time_t(g.period_ns / 1000000000ull), long(g.period_ns % 1000000000ull)};
  its.it_value = {time_t(first / 1000000000ull), long(first % 1000000000ull)};
  timer_settime(s->timer, 0, &its, nullptr);
  g.threads.fetch_add(1, std::memory_order_relaxed);
  // A stop that ran while this slot was still being set up skipped it.
  if (!g.enabled.load() && disarm(s, kDead)) release(s);
  return s;
}

void on_thread_exit(void* p) {
  sandbox::OwnCalls own;
  Slot* s = static_cast<Slot*>(p);
  int32_t tid = int32_t(sys::gettid());
  // After a fork or a failed exec the slot may belong to another thread.
  if (s < g.slots || s >= g.slots + kMaxSlots || s->tid.load() != tid) return;
  if (!disarm(s, kDead)) return;  // the stop has it
  // Its serial named, in case no sample did (its start routine's entry).
  g_table.serial_now(&s->serial, &g.serials, tid);
  credit(s, sys::now_ns(CLOCK_THREAD_CPUTIME_ID));
  release(s);
}

// A thread's name as the kernel has it, for a serial that no sample or
// thread end of its own has named; not signal-safe.
void record_comm(uint32_t serial, int32_t tid) {
  char path[64], name[32] = {0};
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
  int fd = fsroot::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t r = read(fd, name, sizeof name - 1);
  close(fd);
  if (r > 0 && name[r - 1] == '\n') name[r - 1] = 0;
  if (r > 0) g_table.record_name(serial, tid, name);
}

bool has_slot(int32_t tid) {
  for (uint32_t i = 0, n = used_slots(); i < n; ++i)
    if (g.slots[i].tid.load(std::memory_order_acquire) == tid) return true;
  return false;
}

void arm_existing_threads() {
  DIR* d = fsroot::opendir("/proc/self/task");
  if (!d) return;
  while (struct dirent* e = readdir(d)) {
    int tid = atoi(e->d_name);
    // No exit destructor runs for a thread we did not start: its name now,
    // in case it ends before the stop with no sample.
    if (tid > 0 && !has_slot(tid))
      if (Slot* s = arm(tid, 0, false)) record_comm(s->serial, tid);
  }
  closedir(d);
}

bool map_tables(std::string* err) {
  g.slots = static_cast<Slot*>(map_zeroed(sizeof(Slot) * kMaxSlots));
  if (!g.slots) {
    *err = std::string("cannot map the CPU sample table: ") + strerror(errno);
    return false;
  }
  if (!g_table.map("CPU sample", err)) return false;
  g.serials = 0;
  g.hint = 0, g.high_water = 0;
  g.signals = 0, g.expirations = 0, g.credited = 0, g.credited_nanos = 0, g.threads = 0, g.timer_failures = 0;
  g.cut = 0;
  return true;
}

void unmap_tables() {
  munmap(g.slots, sizeof(Slot) * kMaxSlots);
  g_table.unmap();
}

// A quarter of what the user's RLIMIT_SIGPENDING leaves free now (SigQ in
// /proc/self/status: queued for this user / limit); the limit is the
// user's, so a fork child asks again.
long timer_quota() {
  struct rlimit rl;
  if (getrlimit(RLIMIT_SIGPENDING, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return LONG_MAX;
  long limit = long(rl.rlim_cur), used = 0;
  std::string status = sys::read_file("/proc/self/status");
  size_t at = status.find("\nSigQ:\t");
  if (at != std::string::npos) used = strtol(status.c_str() + at + 7, nullptr, 10);
  long quota = (limit - used) / 4;
  return quota > 0 ? quota : 0;  // none at all: the program keeps its last slots
}

bool arm_self(std::string* err, uint64_t start_fn = 0) {
  Slot* self = arm(sys::gettid(), start_fn, false);
  // No queued-signal slot left for it (RLIMIT_SIGPENDING): this thread goes
  // unsampled, counted, as any other past the quota; the others are not.
  if (!self && errno == EAGAIN) return true;
  if (!self) {
    g.enabled.store(false);
    *err = std::string("cannot create a per-thread CPU timer: ") + strerror(errno);
    return false;
  }
  pthread_setspecific(g.key, self);
  return true;
}

void wait_in_flight() {
  for (int i = 0; i < 1000 && g.in_flight.load() > 0; ++i) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace

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
      uint64_t pc = uint64_t(static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP]) | stackwalk::kExact;
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

void quiesce_for_fork() {
  // No new thread is armed while forks are under way (a timer the child
  // would not own); samples go on (on_timer).
  if (g_forks.fetch_add(1) == 0) g_was_enabled_at_fork.store(g.enabled.exchange(false));
}

void resume_after_fork_in_parent() {
  if (g_forks.fetch_sub(1) == 1 && g_was_enabled_at_fork && !g_stopped.load()) g.enabled.store(true);
}

void reset_after_fork() {
  g.in_flight.store(0);
  g_forks.store(0);
  g_stopped.store(false);
  if (!g_table.mapped() || !g_was_enabled_at_fork) return;
  // Timers are not inherited by fork and the samples so far are the
  // parent's: the child starts from empty tables, with one thread, whose
  // start routine (or main) is still where its CPU goes without a sample.
  Slot* was = static_cast<Slot*>(pthread_getspecific(g.key));
  uint64_t start_fn = was >= g.slots && was < g.slots + kMaxSlots ? was->start_fn : 0;
  unmap_tables();
  std::string err;
  if (!map_tables(&err)) {
    g.enabled.store(false);
    return;
  }
  g.live_timers.store(0);  // timers are not inherited
  // Under the parent's seccomp filter, which forbade the timers: empty
  // tables, nothing armed, and a stop with nothing to delete (the parent's
  // timer ids may be the child program's own by now).
  if (sandbox::running_forbidden()) {
    g_stopped.store(true);
    return;
  }
  g.enabled.store(true);
  g.timer_quota = timer_quota();
  arm_self(&err, start_fn);
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
