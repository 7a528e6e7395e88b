// sampler_slots: see sampler_slots.h.
#include "sampler_slots.h"

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
namespace slots {

State g;
stack_table::Table g_table;
std::atomic<int> g_forks{0};
std::atomic<bool> g_was_enabled_at_fork{false};
std::atomic<bool> g_stopped{false};

namespace {

uint64_t xorshift(uint64_t x) {
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return x;
}

}  // namespace

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
Slot* arm(pid_t tid, uint64_t start_fn, bool own_exit, const uint64_t* born, int n) {
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
  } else if (born && n > 0 && s->last_cpu) {
    s->last = g_table.add(born, uint32_t(n), tid, s->serial, 0, 0, s->last_cpu);
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

namespace {
bool g_slots_wiped;  // a fork child finds the slots zeroed (stack_table's wiped_)

void reset_counts() {
  g.serials = 0;
  g.hint = 0, g.high_water = 0;
  g.signals = 0, g.expirations = 0, g.credited = 0, g.credited_nanos = 0, g.threads = 0, g.timer_failures = 0;
  g.cut = 0;
}
}  // namespace

bool map_tables(std::string* err) {
  g.slots = static_cast<Slot*>(sys::map_own(sizeof(Slot) * kMaxSlots));
  if (!g.slots) {
    *err = std::string("cannot map the CPU sample table: ") + strerror(errno);
    return false;
  }
  if (!g_table.map("CPU sample", err)) return false;
  g_slots_wiped = sys::wipe_on_fork(g.slots, sizeof(Slot) * kMaxSlots);
  reset_counts();
  return true;
}

bool renew_tables(std::string* err) {
  if (!g_slots_wiped) {
    unmap_tables();
    return map_tables(err);
  }
  if (!g_table.renew("CPU sample", err)) return false;
  reset_counts();
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

bool arm_self(std::string* err, uint64_t start_fn, const uint64_t* born, int n) {
  Slot* self = arm(sys::gettid(), start_fn, false, born, n);
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

}  // namespace slots
}  // namespace sampler
