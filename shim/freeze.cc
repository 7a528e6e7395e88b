// freeze: parking the other threads after a fatal signal; see freeze.h.
#include "freeze.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "fsroot.h"
#include "own_signal.h"
#include "sys.h"
#include "stackwalk.h"

namespace freeze {
namespace {

constexpr uint32_t kMaxFrozen = 1u << 15;
constexpr uint32_t kSet = 1u << 16;  // open addressing, twice the most threads we track
constexpr uint64_t kRound = 200000;  // 200 us between looks
constexpr int kDeafEvery = 10;       // every 2 ms: does a thread that has not answered block our signal?

struct State {
  std::atomic<uint32_t> nfrozen;
  std::atomic<int32_t> frozen[kMaxFrozen];  // tids, in the order they parked (0: being written)
  std::atomic<uint64_t> park_until;
  volatile uint32_t never;  // a futex word nobody wakes
};
State g;

// Page-aligned, and a whole number of pages: each is left out of cores.
struct alignas(4096) TidSet {
  int32_t slot[kSet];
  bool insert(int32_t tid) {
    for (uint32_t i = uint32_t(tid) * 2654435761u, n = 0; n < kSet; ++i, ++n) {
      int32_t& s = slot[i & (kSet - 1)];
      if (s == tid) return false;
      if (s == 0) {
        s = tid;
        return true;
      }
    }
    return false;
  }
  bool has(int32_t tid) const {
    for (uint32_t i = uint32_t(tid) * 2654435761u, n = 0; n < kSet; ++i, ++n) {
      int32_t s = slot[i & (kSet - 1)];
      if (s == tid) return true;
      if (s == 0) return false;
    }
    return false;
  }
};

void pause_ns(uint64_t ns) {
  struct timespec ts = {time_t(ns / 1000000000ull), long(ns % 1000000000ull)};
  syscall(SYS_nanosleep, &ts, nullptr);
}

// Calls fn(tid) for every thread listed in /proc/self/task.
template <typename Fn>
void each_thread(int dirfd, Fn fn) {
  char buf[4096];
  syscall(SYS_lseek, dirfd, 0, SEEK_SET);
  for (;;) {
    long n = syscall(SYS_getdents64, dirfd, buf, sizeof buf);
    if (n <= 0) return;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      int32_t tid = 0;
      for (const char* p = d->d_name; *p >= '0' && *p <= '9'; ++p) tid = tid * 10 + (*p - '0');
      if (tid > 0) fn(tid);
      off += d->d_reclen;
    }
  }
}

// Whether a thread blocks sig in the kernel.
bool blocks(int32_t tid, int sig) {
  char path[48] = "/proc/self/task/";
  size_t len = 16;
  if (tid > 0) len = size_t(sys::put_uint(path + len, unsigned(tid)) - path);
  const char tail[] = "/status";
  for (size_t i = 0; i < sizeof tail; ++i) path[len + i] = tail[i];
  int fd = fsroot::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[2048];
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  if (n <= 0) return false;
  buf[n] = 0;
  for (long i = 0; i + 8 < n; ++i) {
    if (buf[i] != '\n' || buf[i + 1] != 'S' || buf[i + 4] != 'B' || buf[i + 5] != 'l' || buf[i + 6] != 'k') continue;
    uint64_t mask = 0;
    for (long j = i + 8; j < n && buf[j] != '\n'; ++j) {
      char c = buf[j];
      int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (v >= 0) mask = mask << 4 | uint64_t(v);
    }
    return (mask >> (sig - 1)) & 1;
  }
  return false;
}

// Whether a thread blocks the shim's signal (glibc's helper threads block
// everything): it will never answer, so nobody waits for it.
bool blocks_ours(int32_t tid) { return blocks(tid, own_signal::number()); }

}  // namespace

std::atomic<bool> g_requested{false};
namespace {
__thread bool t_exempt;
}

bool exempt(bool on) {
  bool was = t_exempt;
  t_exempt = on;
  return was;
}

namespace {
// Whether parking is announced (kCertain) or only held for a moment (kHeld):
// release() ends the latter alone.
enum { kNone, kHeld, kCertain };
std::atomic<int> g_kind{kNone};

void extend(uint64_t park_until_ns) {
  uint64_t was = g.park_until.load();
  while (was < park_until_ns && !g.park_until.compare_exchange_weak(was, park_until_ns)) {
  }
}
}  // namespace

void after_fork() {
  g_kind.store(kNone);
  g_requested.store(false);
  g.park_until.store(0);
}

void announce(uint64_t park_until_ns) {
  g_kind.store(kCertain);
  extend(park_until_ns);
  g_requested.store(true);
}

void hold(uint64_t park_until_ns) {
  int none = kNone;
  g_kind.compare_exchange_strong(none, kHeld);
  extend(park_until_ns);
  g_requested.store(true);
}

void release() {
  int held = kHeld;
  if (!g_kind.compare_exchange_strong(held, kNone)) return;
  // park_until stays: a thread parked now wakes at it, milliseconds off,
  // and an announce's own bound is never cut short.
  g_requested.store(false);
  // An announce between the exchange and here: its request stands.
  if (g_kind.load() == kCertain) g_requested.store(true);
}

void at_call() {
  if (t_exempt || !stackwalk::may_park_here()) return;
  park_here();
}

void after_alloc() {
  if (t_exempt || !stackwalk::may_park_leaving_alloc()) return;
  int e = errno;
  // Parked here the thread holds none of the allocator's locks, though its
  // stack still passes through the shim's malloc: a fatal signal deferred
  // for having come inside malloc, retried now, must not be deferred again.
  stackwalk::LeftAlloc left;
  park_here();
  errno = e;
}

Result others(uint64_t deadline_ns, uint64_t park_until_ns) {
  Result r;
  announce(park_until_ns);
  int dirfd = fsroot::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return r;
  // In .bss, not on the (fresh but bounded) stack: 256 KiB each, zeroed
  // whole here, and out of the core the process dumps next (sys.h).
  static TidSet parked, deaf, suspect;
  for (TidSet* set : {&parked, &deaf, &suspect}) sys::dont_dump(set, sizeof *set);
  for (auto& s : parked.slot) s = 0;
  for (auto& s : deaf.slot) s = 0;
  for (auto& s : suspect.slot) s = 0;
  const int32_t self = int32_t(sys::gettid());
  uint32_t absorbed = 0;
  for (int round = 0;; ++round) {
    uint32_t n = g.nfrozen.load(std::memory_order_acquire);
    if (n > kMaxFrozen) n = kMaxFrozen;
    for (int32_t t; absorbed < n && (t = g.frozen[absorbed].load(std::memory_order_acquire)) != 0; ++absorbed)
      parked.insert(t);
    int threads = 0, waiting = 0, frozen = 0, unanswered = 0;
    each_thread(dirfd, [&](int32_t tid) {
      if (tid == self) return;
      ++threads;
      if (parked.has(tid)) {
        ++frozen;
        return;
      }
      if (deaf.has(tid)) {
        ++unanswered;
        return;
      }
      // Seen blocking it twice, 2 ms apart: once may be a moment inside a
      // handler of the shim's own (every signal blocked), and a thread taken
      // for deaf then would be left running through the whole stop.
      if (round > 0 && round % kDeafEvery == 0 && blocks_ours(tid) && !suspect.insert(tid)) {
        deaf.insert(tid);
        ++unanswered;
        return;
      }
      ++waiting;
      // Asked again every round: one that declined (inside the allocator)
      // is out of it within microseconds, and runs the program from there.
      own_signal::send(tid, own_signal::kFreeze);
    });
    r.threads = threads, r.frozen = frozen, r.unanswered = unanswered + waiting;
    if (waiting == 0 || sys::now_ns(CLOCK_MONOTONIC) >= deadline_ns) break;
    pause_ns(kRound);
  }
  syscall(SYS_close, dirfd);
  return r;
}

Result others_before(uint64_t stop_deadline_ns) {
  uint64_t now = sys::now_ns(CLOCK_MONOTONIC);
  uint64_t quarter = (stop_deadline_ns - now) / 4;
  return others(now + (quarter < 300000000ull ? quarter : 300000000ull), stop_deadline_ns + 5000000000ull);
}

bool another_takes_now(int sig);

bool another_takes(int sig) {
  // Other threads block every signal for moments of their own (glibc's
  // pthread_create while it clones, a new thread until it is set up): one
  // that blocks it now may take it a moment later. Asked again for up to
  // 20 ms before the answer is no.
  for (int i = 0; i < 100; ++i) {
    if (another_takes_now(sig)) return true;
    struct timespec ts = {0, 200000};
    syscall(SYS_nanosleep, &ts, nullptr);
  }
  return false;
}

bool another_takes_now(int sig) {
  int dirfd = fsroot::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return false;
  const int32_t self = int32_t(sys::gettid());
  bool found = false;
  each_thread(dirfd, [&](int32_t tid) {
    if (!found && tid != self && !blocks(tid, sig)) found = true;
  });
  syscall(SYS_close, dirfd);
  return found;
}

void park_here() {
  uint32_t i = g.nfrozen.fetch_add(1, std::memory_order_acq_rel);
  if (i < kMaxFrozen) g.frozen[i].store(int32_t(sys::gettid()), std::memory_order_release);
  for (;;) {
    uint64_t now = sys::now_ns(CLOCK_MONOTONIC), until = g.park_until.load();
    if (now >= until) return;
    sys::futex_wait(&g.never, 0, until - now);
  }
}

void on_request(void* uc) {
  if (stackwalk::interrupted_in_unsafe_code(uc)) return;  // asked again in a moment
  park_here();
}

}  // namespace freeze
