// waits: the wait profile's engine -- where the program's threads wait, by
// stack, as Go's block profile. The blocking calls interposed in
// hooks_wait.cc are timed on the waiting thread; an event of duration d is
// recorded with probability min(1, d/R) (R = PROFILE_WAIT_SAMPLE), its
// count and delay scaled by R/d when d < R (Go's runtime/mprof.go,
// blocksampled and saveblockevent): unbiased. The stack is taken on the
// waiting thread after the call returns, in its own context: no signal is
// ever sent to a thread because it waits.
//
// Cost. Off: one predictable branch per call (on()). On: two reads of the
// clock per call (the TSC when it is the kernel's clocksource, else
// CLOCK_MONOTONIC) and a draw; an event that is recorded costs a stack walk.
//
// What is not recorded: the shim's own calls (the caller is the shim's own
// code, or the thread is the shim's: sigmask::internal() -- its stop thread
// and handlers -- or quiet_thread()), a call nested in another timed call (getaddrinfo's NSS
// modules; a program's handler that interrupted a timed call: the outer
// call holds that time), and a vfork child's.
//
// Signal safety: record() is async-signal-safe (stackwalk.h's walk, the
// lock-free stack_table.h, raw system calls, errno kept), allocates
// nothing, and is not re-entered on one thread (a handler that interrupts
// a record passes through). So a program's signal handler that calls
// write() is timed and recorded like any other code.
#pragma once
#include <stdint.h>
#include <time.h>
#include <x86intrin.h>

#include <atomic>
#include <string>

#include "freeze.h"
#include "stack_table.h"

namespace waits {

// The calls, as the label `call` and the stack's leaf name them (a
// fortified or 64-bit alias, __read_chk or pread64, by the name the
// program's source calls).
enum Call : uint32_t {
  kMutexLock = 1, kMutexTimedlock, kRwlockRdlock, kRwlockWrlock, kCondWait, kCondTimedwait, kCondClockwait,
  kSemWait, kSemTimedwait, kJoin,
  kRead, kWrite, kPread, kPwrite, kReadv, kWritev, kRecv, kRecvfrom, kRecvmsg, kRecvmmsg, kSend, kSendto,
  kSendmsg, kSendmmsg, kAccept, kAccept4, kConnect,
  kPoll, kPpoll, kSelect, kPselect, kEpollWait, kEpollPwait,
  kNanosleep, kClockNanosleep, kUsleep, kSleep,
  kFsync, kFdatasync, kGetaddrinfo, kWaitpid, kWait4, kWait, kFlock, kFcntl,
  kCalls
};
const char* call_name(uint32_t call);

// Read on every call: whether the profile is on, and how to sample.
struct Hot {
  std::atomic<bool> on;
  bool tsc;        // ticks are the TSC's; else CLOCK_MONOTONIC nanoseconds
  uint64_t rate;   // R, in ticks
  uint64_t scale;  // 2^64 / rate: a draw below d * scale has probability d/R
};
extern Hot g_hot;
extern __thread uint64_t t_draw;

// Every wrapper asks this first: also where a thread parks once the process
// is dying of a fatal signal (freeze.h), profile on or off.
inline bool on() {
  if (__builtin_expect(freeze::requested(), 0)) freeze::at_call();
  return g_hot.on.load(std::memory_order_relaxed);
}

inline uint64_t now() {
  if (g_hot.tsc) return __rdtsc();
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Whether the event that began at t0 (now()) is recorded; *d its duration
// in ticks. Draws with xorshift64* on a per-thread state.
inline bool sampled(uint64_t t0, uint64_t* d) {
  uint64_t t = now() - t0;
  *d = int64_t(t) > 0 ? t : 1;  // a TSC read on another core a hair behind
  if (*d >= g_hot.rate) return true;
  uint64_t x = t_draw ? t_draw : (t0 | 1);
  x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
  t_draw = x;
  return x * 0x2545f4914f6cdd1dull < *d * g_hot.scale;
}

// A sampled event of d ticks of `call`, called from a wrapper of
// hooks_wait.cc (whose caller is `caller`): its stack and weight to the
// table. Signal-safe; keeps errno.
void record(Call call, uint64_t d, void* caller);

// At setup: the table, the clock, R in nanoseconds (> 0). False with *err.
bool start(uint64_t rate_ns, std::string* err);
// At the stop, before anything is read: no more records.
void stop();
// On a thread of the shim's (unload.h's helper): its waits are not recorded.
void quiet_thread();
// In a fork child: fresh tables (the parent's events are the parent's).
void reset_after_fork();
// After a failed exec: on again, the same tables.
void resume();

// The events so far, count in contentions and weight in nanoseconds of
// delay, tag the Call. Safe while recording goes on.
void for_each(void (*fn)(const stack_table::Stack&, void*), void* arg);
// The stacks published since *cursor (unload.h); counts as they are.
void for_each_since(uint64_t* cursor, void (*fn)(const stack_table::Stack&, void*), void* arg);
std::string thread_name(uint32_t serial);
uint64_t rate_ns();
struct Stats {
  uint64_t records, dropped;  // events recorded; events the full table lost
};
Stats stats();

}  // namespace waits
