// sampler_slots: the CPU sampler's per-thread timers, one slot each (a
// thread's timer, its serial, what its samples have counted), and the
// tables they fill: what the handler and the lifecycle in sampler.cc share.
// Internal to the sampler: nothing but sampler*.cc includes this.
#pragma once
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <string>

#include "stack_table.h"

namespace sampler {
namespace slots {

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
extern State g;
extern stack_table::Table g_table;  // the samples: (thread, stack) -> expirations, CPU
// Forks under way (threads may fork at once); sampling comes back when the
// last one is done, if it was on when the first began.
extern std::atomic<int> g_forks;
extern std::atomic<bool> g_was_enabled_at_fork;
// The stop has taken the samples: nothing is added after it, a fork under
// way or not.
extern std::atomic<bool> g_stopped;
inline bool forking() { return g_forks.load() > 0 && g_was_enabled_at_fork.load() && !g_stopped.load(); }

// The kernel's per-thread CPU clock id for any tid of this process.
clockid_t thread_clock(pid_t tid);
// At a thread's end or the stop: what it used since its last sample, to
// its last sampled stack (sampler_slots.cc says why by its clock).
void credit(Slot* s, uint64_t cpu_now);
// Every slot ever claimed lies below this.
uint32_t used_slots();
void release(Slot* s);
// Deletes s's timer exactly once, whoever gets here first; to: kDead or kStopped.
bool disarm(Slot* s, uint32_t to);
// Arms a timer on tid's CPU clock; null when none could be (counted).
// born (n frames, the calling thread's own stack): what the thread's clock
// holds already is credited there before the timer exists (a fork child's
// thread, whose clock started at the fork).
Slot* arm(pid_t tid, uint64_t start_fn, bool own_exit, const uint64_t* born = nullptr, int n = 0);
// The thread key's destructor: a thread's end.
void on_thread_exit(void* p);
// A thread's name as the kernel has it, for serial; not signal-safe.
void record_comm(uint32_t serial, int32_t tid);
// Every thread of the process without a slot gets one.
void arm_existing_threads();
bool map_tables(std::string* err);
// In a fork child: empty tables and counts, as map_tables makes them.
bool renew_tables(std::string* err);
void unmap_tables();
// How many timers this image may hold (RLIMIT_SIGPENDING).
long timer_quota();
// The calling thread's timer; false with *err only when sampling cannot run.
bool arm_self(std::string* err, uint64_t start_fn = 0, const uint64_t* born = nullptr, int n = 0);
// Until no handler runs (bounded).
void wait_in_flight();

}  // namespace slots
}  // namespace sampler
