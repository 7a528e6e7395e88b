// sampler: per-thread CPU-time timers, the sampling signal handler and the
// lock-free stack table; see sampler.h for the signal contract.
#include "sampler.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <dlfcn.h>

#include "real.h"
#include "sys.h"

namespace sampler {
namespace {

constexpr int kMaxDepth = 128;
constexpr uint32_t kMaxSlots = 1u << 14;        // threads alive at once
constexpr uint32_t kTableSize = 1u << 15;       // distinct (stack, thread) pairs
constexpr uint64_t kArenaWords = 1ull << 21;    // 16 MiB of PCs, touched as used
constexpr uint32_t kMaxNames = 1u << 15;
constexpr int kProbe = 64;

enum SlotState : uint32_t { kFree = 0, kClaimed = 1, kLive = 2, kDead = 3 };

struct Slot {
  std::atomic<uint32_t> state;
  std::atomic<int32_t> tid;
  timer_t timer;
  uint64_t last_cpu;  // written only by the owning thread's handler after setup
};

struct Entry {
  std::atomic<uint32_t> state;  // 0 empty, 1 being written, 2 ready
  int32_t tid;
  uint32_t depth;
  uint64_t hash;
  uint64_t off;
  std::atomic<uint64_t> count, nanos;
};

struct Name { int32_t tid; char name[16]; };

// libunwind is dlopen()ed RTLD_LOCAL when sampling starts: Debian's static
// libunwind is not PIC, and linking the shared one would put its
// _Unwind_Backtrace ahead of libgcc's for every object in the process
// (jemalloc's heap sampling measured 4x slower through it).
struct Unw {
  int (*init_local2)(unw_cursor_t*, unw_context_t*, int);
  int (*step)(unw_cursor_t*);
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*);
  int (*set_caching_policy)(unw_addr_space_t, unw_caching_policy_t);
  unw_addr_space_t* local_as;
};
Unw u;

bool load_libunwind(std::string* err) {
  void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *err = std::string("cannot load libunwind.so.8 for CPU sampling: ") + dlerror();
    return false;
  }
  u.init_local2 = reinterpret_cast<decltype(u.init_local2)>(dlsym(h, "_ULx86_64_init_local2"));
  u.step = reinterpret_cast<decltype(u.step)>(dlsym(h, "_ULx86_64_step"));
  u.get_reg = reinterpret_cast<decltype(u.get_reg)>(dlsym(h, "_ULx86_64_get_reg"));
  u.set_caching_policy =
      reinterpret_cast<decltype(u.set_caching_policy)>(dlsym(h, "_ULx86_64_set_caching_policy"));
  u.local_as = static_cast<unw_addr_space_t*>(dlsym(h, "_ULx86_64_local_addr_space"));
  if (!u.init_local2 || !u.step || !u.get_reg || !u.set_caching_policy || !u.local_as) {
    *err = "libunwind.so.8 lacks the local unwinding API";
    return false;
  }
  return true;
}

struct State {
  Slot* slots;
  Entry* table;
  uint64_t* arena;
  Name* names;
  std::atomic<uint64_t> arena_used, names_used;
  std::atomic<uint64_t> samples, dropped, dropped_nanos, threads, timer_failures;
  std::atomic<int> in_flight;
  std::atomic<bool> enabled;
  uint64_t period_ns;
  pthread_key_t key;
};
State g;

void* map_zeroed(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// The kernel's per-thread CPU clock id for any tid of this process
// (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) in linux/posix-timers.h).
clockid_t thread_clock(pid_t tid) { return clockid_t((~unsigned(tid) << 3) | 6); }

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

int unwind(void* uc, uint64_t* pcs) {
  unw_cursor_t cur;
  if (u.init_local2(&cur, static_cast<unw_context_t*>(uc), UNW_INIT_SIGNAL_FRAME) < 0) {
    pcs[0] = uint64_t(static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP]);
    return 1;
  }
  int n = 0;
  do {
    unw_word_t ip = 0;
    if (u.get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0) break;
    pcs[n++] = ip;
  } while (n < kMaxDepth && u.step(&cur) > 0);
  if (n == 0) {  // keep the sample: the interrupted instruction at least
    pcs[0] = uint64_t(static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP]);
    n = 1;
  }
  return n;
}

bool same_stack(const Entry& e, uint64_t h, int32_t tid, const uint64_t* pcs, uint32_t n) {
  return e.hash == h && e.tid == tid && e.depth == n &&
         memcmp(g.arena + e.off, pcs, n * sizeof(uint64_t)) == 0;
}

void drop(uint64_t w) {
  g.dropped.fetch_add(1, std::memory_order_relaxed);
  g.dropped_nanos.fetch_add(w, std::memory_order_relaxed);
}

void fill(Entry& e, uint64_t h, int32_t tid, const uint64_t* pcs, uint32_t n, uint64_t w) {
  uint64_t off = g.arena_used.fetch_add(n, std::memory_order_relaxed);
  if (off + n > kArenaWords) {
    e.depth = 0;  // matches nothing; skipped by for_each
    e.state.store(2, std::memory_order_release);
    drop(w);
    return;
  }
  memcpy(g.arena + off, pcs, n * sizeof(uint64_t));
  e.hash = h, e.tid = tid, e.depth = n, e.off = off;
  e.count.store(1, std::memory_order_relaxed);
  e.nanos.store(w, std::memory_order_relaxed);
  e.state.store(2, std::memory_order_release);
}

void add(const uint64_t* pcs, uint32_t n, int32_t tid, uint64_t w) {
  uint64_t h = mix(0, uint64_t(tid));
  for (uint32_t i = 0; i < n; ++i) h = mix(h, pcs[i]);
  for (int p = 0; p < kProbe; ++p) {
    Entry& e = g.table[(h + uint64_t(p)) & (kTableSize - 1)];
    uint32_t st = e.state.load(std::memory_order_acquire);
    if (st == 0) {
      uint32_t zero = 0;
      if (e.state.compare_exchange_strong(zero, 1, std::memory_order_acq_rel)) {
        fill(e, h, tid, pcs, n, w);
        return;
      }
      st = e.state.load(std::memory_order_acquire);
    }
    if (st == 2 && same_stack(e, h, tid, pcs, n)) {
      e.count.fetch_add(1, std::memory_order_relaxed);
      e.nanos.fetch_add(w, std::memory_order_relaxed);
      return;
    }
  }
  drop(w);
}

void sample(siginfo_t* si, void* uc) {
  Slot* s = static_cast<Slot*>(si->si_value.sival_ptr);
  if (s < g.slots || s >= g.slots + kMaxSlots) return;
  int32_t tid = int32_t(sys::gettid());
  if (s->tid.load(std::memory_order_acquire) != tid) return;  // stale signal for a reused slot
  uint64_t now = sys::now_ns(CLOCK_THREAD_CPUTIME_ID);
  uint64_t w = now > s->last_cpu ? now - s->last_cpu : 0;
  s->last_cpu = now;
  uint64_t pcs[kMaxDepth];
  int n = unwind(uc, pcs);
  g.samples.fetch_add(1, std::memory_order_relaxed);
  add(pcs, uint32_t(n), tid, w);
}

void handler(int, siginfo_t* si, void* uc) {
  int saved = errno;
  if (si && si->si_code == SI_TIMER) {
    g.in_flight.fetch_add(1);
    if (g.enabled.load()) sample(si, uc);
    g.in_flight.fetch_sub(1);
  }
  errno = saved;
}

uint64_t xorshift(uint64_t x) {
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return x;
}

Slot* claim_slot(int32_t tid) {
  static std::atomic<uint32_t> hint{0};
  uint32_t start = hint.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    Slot& s = g.slots[(start + i) & (kMaxSlots - 1)];
    uint32_t want = kFree;
    if (s.state.compare_exchange_strong(want, kClaimed)) {
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

bool disarm(Slot* s);

// Arms a timer on tid's CPU clock, first expiry at a random point of the
// first period so that short-lived threads are not biased against.
Slot* arm(pid_t tid) {
  Slot* s = claim_slot(int32_t(tid));
  if (!s) {
    g.timer_failures.fetch_add(1);
    return nullptr;
  }
  clockid_t clock = thread_clock(tid);
  s->last_cpu = sys::now_ns(clock);
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = signal_number();
  sev.sigev_value.sival_ptr = s;
  sev._sigev_un._tid = tid;
  if (timer_create(clock, &sev, &s->timer) != 0) {
    g.timer_failures.fetch_add(1);
    release(s);
    return nullptr;
  }
  s->state.store(kLive, std::memory_order_release);
  uint64_t first = 1 + xorshift(sys::now_ns(CLOCK_MONOTONIC) ^ uint64_t(tid) * 0x9e37) % g.period_ns;
  struct itimerspec its;
  its.it_interval = {time_t(g.period_ns / 1000000000ull), long(g.period_ns % 1000000000ull)};
  its.it_value = {time_t(first / 1000000000ull), long(first % 1000000000ull)};
  timer_settime(s->timer, 0, &its, nullptr);
  g.threads.fetch_add(1, std::memory_order_relaxed);
  // A stop that ran while this slot was still being set up skipped it.
  if (!g.enabled.load()) disarm(s);
  return s;
}

// Deletes the timer exactly once, whoever gets here first (the thread's
// exit destructor or stop()): a second timer_delete could hit a timer id
// the kernel has since handed to the program.
bool disarm(Slot* s) {
  uint32_t want = kLive;
  if (!s->state.compare_exchange_strong(want, kDead)) return false;
  timer_delete(s->timer);
  return true;
}

void record_name(int32_t tid, const char* name) {
  uint64_t i = g.names_used.fetch_add(1);
  if (i >= kMaxNames) return;
  g.names[i].tid = tid;
  size_t n = strnlen(name, sizeof g.names[i].name - 1);
  memcpy(g.names[i].name, name, n);
  g.names[i].name[n] = 0;
}

void on_thread_exit(void* p) {
  Slot* s = static_cast<Slot*>(p);
  int32_t tid = int32_t(sys::gettid());
  // After a fork or a failed exec the slot may belong to another thread.
  if (s < g.slots || s >= g.slots + kMaxSlots || s->tid.load() != tid) return;
  char name[17] = {0};
  prctl(PR_GET_NAME, name, 0, 0, 0);
  record_name(tid, name);
  if (disarm(s)) release(s);
}

// A thread's name as the kernel has it; not signal-safe.
void record_comm(int32_t tid) {
  char path[64], name[32] = {0};
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t r = read(fd, name, sizeof name - 1);
  close(fd);
  if (r > 0 && name[r - 1] == '\n') name[r - 1] = 0;
  if (r > 0) record_name(tid, name);
}

bool has_slot(int32_t tid) {
  for (uint32_t i = 0; i < kMaxSlots; ++i)
    if (g.slots[i].tid.load(std::memory_order_acquire) == tid) return true;
  return false;
}

void arm_existing_threads() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return;
  while (struct dirent* e = readdir(d)) {
    int tid = atoi(e->d_name);
    // No exit destructor runs for a thread we did not start: its name now,
    // in case it ends before the stop (the stop reads it again if not).
    if (tid > 0 && !has_slot(tid) && arm(tid)) record_comm(tid);
  }
  closedir(d);
}

bool map_tables(std::string* err) {
  g.slots = static_cast<Slot*>(map_zeroed(sizeof(Slot) * kMaxSlots));
  g.table = static_cast<Entry*>(map_zeroed(sizeof(Entry) * kTableSize));
  g.arena = static_cast<uint64_t*>(map_zeroed(sizeof(uint64_t) * kArenaWords));
  g.names = static_cast<Name*>(map_zeroed(sizeof(Name) * kMaxNames));
  if (!g.slots || !g.table || !g.arena || !g.names) {
    *err = std::string("cannot map the CPU sample table: ") + strerror(errno);
    return false;
  }
  g.arena_used = 0, g.names_used = 0;
  g.samples = 0, g.dropped = 0, g.dropped_nanos = 0, g.threads = 0, g.timer_failures = 0;
  return true;
}

void unmap_tables() {
  munmap(g.slots, sizeof(Slot) * kMaxSlots);
  munmap(g.table, sizeof(Entry) * kTableSize);
  munmap(g.arena, sizeof(uint64_t) * kArenaWords);
  munmap(g.names, sizeof(Name) * kMaxNames);
}

bool arm_self(std::string* err) {
  Slot* self = arm(sys::gettid());
  if (!self) {
    g.enabled.store(false);
    *err = std::string("cannot create a per-thread CPU timer: ") + strerror(errno);
    return false;
  }
  pthread_setspecific(g.key, self);
  return true;
}

}  // namespace

int signal_number() { return SIGRTMAX - 4; }

bool running() { return g.enabled.load(std::memory_order_relaxed); }

bool start(uint32_t hz, std::string* err) {
  if (!map_tables(err) || !load_libunwind(err)) return false;
  g.period_ns = 1000000000ull / hz;
  // Not UNW_CACHE_PER_THREAD: that cache is a __thread variable of a
  // dlopen()ed library, which glibc allocates lazily with malloc inside
  // __tls_get_addr -- in our signal handler, possibly on a thread stopped
  // inside malloc. The global cache takes a lock with signals blocked.
  u.set_caching_policy(*u.local_as, UNW_CACHE_GLOBAL);
  if (pthread_key_create(&g.key, on_thread_exit) != 0) {
    *err = "cannot create a thread key for the CPU timers";
    return false;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (real::sigaction()(signal_number(), &sa, nullptr) != 0) {
    *err = std::string("cannot install the CPU sampling signal handler: ") + strerror(errno);
    return false;
  }
  g.enabled.store(true);
  if (!arm_self(err)) return false;
  arm_existing_threads();
  return true;
}

namespace {
// Forks under way (threads may fork at once); sampling comes back when the
// last one is done, if it was on when the first began.
std::atomic<int> g_forks{0};
bool g_was_enabled_at_fork;
}  // namespace

void quiesce_for_fork() {
  if (g_forks.fetch_add(1) == 0) g_was_enabled_at_fork = g.enabled.exchange(false);
  for (int i = 0; i < 1000 && g.in_flight.load() > 0; ++i) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, nullptr);
  }
}

void resume_after_fork_in_parent() {
  if (g_forks.fetch_sub(1) == 1 && g_was_enabled_at_fork) g.enabled.store(true);
}

void reset_after_fork() {
  g.in_flight.store(0);
  g_forks.store(0);
  if (!g.table || !g_was_enabled_at_fork) return;
  // Timers are not inherited by fork and the samples so far are the
  // parent's: the child starts from empty tables, with one thread.
  unmap_tables();
  std::string err;
  if (!map_tables(&err)) {
    g.enabled.store(false);
    return;
  }
  g.enabled.store(true);
  arm_self(&err);
}

void resume() {
  if (!g.table || g.enabled.load()) return;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    uint32_t dead = kDead;
    if (g.slots[i].state.load() == kDead) {
      g.slots[i].tid.store(0);
      g.slots[i].state.compare_exchange_strong(dead, kFree);
    }
  }
  g.enabled.store(true);
  arm_existing_threads();
}

void thread_begin() {
  if (!running() || pthread_getspecific(g.key)) return;
  if (Slot* s = arm(sys::gettid())) pthread_setspecific(g.key, s);
}

void stop() {
  if (!g.enabled.exchange(false)) return;
  for (uint32_t i = 0; i < kMaxSlots; ++i) {
    Slot& s = g.slots[i];
    int32_t tid = s.tid.load();
    if (disarm(&s)) record_comm(tid);
  }
  for (int i = 0; i < 1000 && g.in_flight.load() > 0; ++i) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, nullptr);
  }
}

void for_each(void (*fn)(const Stack&, void*), void* arg) {
  if (!g.table) return;
  for (uint32_t i = 0; i < kTableSize; ++i) {
    Entry& e = g.table[i];
    if (e.state.load(std::memory_order_acquire) != 2 || e.depth == 0) continue;
    Stack s = {g.arena + e.off, e.depth, e.tid, e.count.load(), e.nanos.load()};
    fn(s, arg);
  }
}

Stats stats() {
  return {g.samples.load(), g.dropped.load(), g.dropped_nanos.load(), g.threads.load(),
          g.timer_failures.load()};
}

std::string thread_name(int32_t tid) {
  uint64_t n = g.names_used.load();
  if (n > kMaxNames) n = kMaxNames;
  for (uint64_t i = n; i-- > 0;)
    if (g.names[i].tid == tid) return g.names[i].name;
  return "";
}

}  // namespace sampler
