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

#include <atomic>
#include <string>

#include "arch.h"
#include "freeze.h"
#include "stack_table.h"

namespace waits {

// The calls, as the label `call` and the stack's leaf name them (a
// fortified or 64-bit alias, __read_chk or pread64, by the name the
// program's source calls). One row per call: the enum and the names are
// both made from this list, so they cannot drift apart.
#define WAITS_CALLS(X)                                                                                   \
  X(kMutexLock, "pthread_mutex_lock") X(kMutexTimedlock, "pthread_mutex_timedlock")                      \
  X(kRwlockRdlock, "pthread_rwlock_rdlock") X(kRwlockWrlock, "pthread_rwlock_wrlock")                    \
  X(kCondWait, "pthread_cond_wait") X(kCondTimedwait, "pthread_cond_timedwait")                          \
  X(kCondClockwait, "pthread_cond_clockwait") X(kSemWait, "sem_wait") X(kSemTimedwait, "sem_timedwait")  \
  X(kJoin, "pthread_join")                                                                               \
  X(kRead, "read") X(kWrite, "write") X(kPread, "pread") X(kPwrite, "pwrite") X(kReadv, "readv")         \
  X(kWritev, "writev") X(kRecv, "recv") X(kRecvfrom, "recvfrom") X(kRecvmsg, "recvmsg")                  \
  X(kRecvmmsg, "recvmmsg") X(kSend, "send") X(kSendto, "sendto") X(kSendmsg, "sendmsg")                  \
  X(kSendmmsg, "sendmmsg") X(kAccept, "accept") X(kAccept4, "accept4") X(kConnect, "connect")            \
  X(kPoll, "poll") X(kPpoll, "ppoll") X(kSelect, "select") X(kPselect, "pselect")                        \
  X(kEpollWait, "epoll_wait") X(kEpollPwait, "epoll_pwait")                                              \
  X(kNanosleep, "nanosleep") X(kClockNanosleep, "clock_nanosleep") X(kUsleep, "usleep") X(kSleep, "sleep") \
  X(kFsync, "fsync") X(kFdatasync, "fdatasync") X(kGetaddrinfo, "getaddrinfo") X(kWaitpid, "waitpid")    \
  X(kWait4, "wait4") X(kWait, "wait") X(kFlock, "flock") X(kFcntl, "fcntl")

// 0 is no call (a stack's tag starts at 1).
enum Call : uint32_t {
  kNoCall,
#define WAITS_CALL_ENUM(id, name) id,
  WAITS_CALLS(WAITS_CALL_ENUM)
#undef WAITS_CALL_ENUM
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
  if (arch::kHasTsc && g_hot.tsc) return arch::tsc();
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// The sampling rule apart from the clock and the thread (unit-tested
// alone). scale: 2^64 / R, so that a draw below d * scale has probability
// d/R.
inline uint64_t scale_for(uint64_t rate) { return rate == 1 ? ~0ull : ~0ull / rate; }
// Whether an event of d ticks (> 0) is kept at rate R: always when d >= R,
// else with probability d/R, drawn with xorshift64* on *state (seeded from
// seed, made odd, while it is 0).
inline bool keep(uint64_t d, uint64_t rate, uint64_t scale, uint64_t seed, uint64_t* state) {
  if (d >= rate) return true;
  uint64_t x = *state ? *state : (seed | 1);
  x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
  *state = x;
  return x * 0x2545f4914f6cdd1dull < d * scale;
}
// A contention, in the table's fixed point (counts are R/d).
constexpr uint64_t kOne = 1024;
// What a kept event of d ticks adds to its stack: count in kOne units and
// delay in ticks, each scaled by R/d when d < R (unbiased: expected d and
// one contention per event).
struct Weight {
  uint64_t count, delay;
};
inline Weight weight(uint64_t d, uint64_t rate) {
  return d >= rate ? Weight{kOne, d} : Weight{(rate * kOne) / d, rate};
}

// Whether the event that began at t0 (now()) is recorded; *d its duration
// in ticks. Draws on a per-thread state.
inline bool sampled(uint64_t t0, uint64_t* d) {
  uint64_t t = now() - t0;
  *d = int64_t(t) > 0 ? t : 1;  // a TSC read on another core a hair behind
  return keep(*d, g_hot.rate, g_hot.scale, t0, &t_draw);
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
// After the final stop's collect (stack_table.h, release_pages).
void release_table();
std::string thread_name(uint32_t serial);
uint64_t rate_ns();
struct Stats {
  uint64_t records, dropped;  // events recorded; events the full table lost
};
Stats stats();

}  // namespace waits
