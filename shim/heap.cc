// heap: mallctl control of the in-shim jemalloc profiler; see heap.h.
#include "heap.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "alloc_choice.h"
#include "jemalloc_raw.h"
#include "malloc_api.h"

namespace heap {
namespace {
// The shim's own calls never pass the filter the program's go through.
int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen) {
  return jemalloc_raw::ctl(name, oldp, oldlenp, newp, newlen);
}
}  // namespace

bool available(std::string* err) {
  if (!alloc_choice::jemalloc()) {
    *err = "the heap profile needs the shim's jemalloc, and this image's allocator was chosen without it "
           "(its environment was unreadable at its first malloc)";
    return false;
  }
  bool prof = false;
  size_t sz = sizeof prof;
  if (mallctl("opt.prof", &prof, &sz, nullptr, 0) != 0 || !prof) {
    *err = "jemalloc heap profiling is not available (opt.prof is false)";
    return false;
  }
  return malloc_api::program_jemalloc_compatible(err);
}

namespace {

bool g_started;

// prof.reset changes the rate for countdowns drawn from now on, but the
// calling thread's countdown to its next sample was drawn at the boot rate
// (a mean of 512 KiB) and would leave its first allocations sampled at that
// rate. Allocating past any plausible remaining countdown (32x the old mean:
// the chance one is longer is e^-32) with this thread's sampling off makes
// jemalloc draw the next one at the new rate without sampling anything.
void redraw_countdown(size_t old_lg) {
  bool was = swap_thread_active(false);
  const size_t chunk = 64 << 10;
  for (size_t total = 0; total < (size_t(32) << old_lg); total += chunk) {
    void* p = malloc(chunk);
    if (!p) break;
    __asm__ volatile("" : : "r"(p) : "memory");  // keep the allocation
    free(p);
  }
  set_thread_active(was);
}

}  // namespace

bool start(unsigned lg_sample, std::string* err) {
  size_t cur = 0, sz = sizeof cur;
  mallctl("prof.lg_sample", &cur, &sz, nullptr, 0);
  if (cur != lg_sample) {
    size_t lg = lg_sample;
    if (mallctl("prof.reset", nullptr, nullptr, &lg, sizeof lg) != 0) {
      *err = "jemalloc refused the heap sample rate (prof.reset)";
      return false;
    }
    redraw_countdown(cur);
  }
  set_active(true);
  // From here on the profile's switches are the shim's alone.
  malloc_api::claim_profiling();
  g_started = true;
  return true;
}

bool started() { return g_started; }

void reset_counts(uint64_t seed) {
  size_t lg = 0, sz = sizeof lg;
  if (!alloc_choice::jemalloc() || mallctl("prof.lg_sample", &lg, &sz, nullptr, 0) != 0) return;
  // The reset gives the calling thread fresh profiling data, whose switch
  // is jemalloc's default for a new thread (off: the shim's threads are
  // kept out that way): it is put back as it was.
  const bool was = swap_thread_active(false);
  mallctl("prof.reset", nullptr, nullptr, &lg, sizeof lg);
  // A fork child inherits its parent's countdown to the next sample and
  // the generator that draws the next ones: every child of a server would
  // sample the same allocations, all or none of them (200 children of 8
  // blocks each: none). Moving each child's countdown by a seeded amount
  // is not enough: the children then walk one sequence of draws, a few
  // draws apart, and their samples still rise and fall together (200
  // children of 8 blocks of 64 KiB: 54 to 163 MB against the 105 MB they
  // allocated, run to run; 79 to 129 MB with 48 draws below, 81 to 117 MB
  // with 256, each child's count of samples then as independent draws
  // give). So each child first spends a seeded number of draws, 0 to 255:
  // jemalloc draws once per allocation that ends the countdown, whatever
  // it spans past it, and a block of 8 mean periods fails to end it once
  // in e^8. Then it moves by a seeded amount within a period. All with
  // sampling off, in at most 255 + 64 malloc/free pairs of untouched
  // memory (no page is faulted in; 500 forks took no longer for them).
  // Above a period of 512 KiB a block of 8 periods would pass 4 MiB, and
  // only the countdown is moved, over 8 periods, in steps up to 4 MiB (a
  // period of 2^36 bytes in 64 KiB steps took seconds per fork).
  constexpr uint64_t kMaxStep = 4 << 20;
  const int saved = errno;  // (a malloc refused here is nobody's business)
  // The draws' count is the seed times an odd number, mod 256: a bijection,
  // so 256 consecutive pids (a server's children) each spend a count of
  // their own.
  const uint64_t x = seed * 0x9e3779b97f4a7c15ull;
  uint64_t y = (x ^ 0x2545f4914f6cdd1dull) * 0xbf58476d1ce4e5b9ull;
  y ^= y >> 31;
  const uint64_t period = lg < 40 ? uint64_t(1) << lg : uint64_t(1) << 40;
  // Blocks of 8 periods only where jemalloc leaves them untouched and
  // unfailing: its junk filling (MALLOC_CONF junk) would write each one,
  // and xmalloc would end the process where one is refused.
  bool xmalloc = false;
  const char* junk = nullptr;
  size_t bsz = sizeof xmalloc, jsz = sizeof junk;
  // (Either option absent: a jemalloc built without it, as Debian's is
  // without xmalloc.)
  const bool fails_hard = mallctl("opt.xmalloc", &xmalloc, &bsz, nullptr, 0) == 0 && xmalloc;
  const bool fills = mallctl("opt.junk", &junk, &jsz, nullptr, 0) == 0 && junk && strcmp(junk, "false") != 0;
  const bool plain = !fails_hard && !fills;
  const bool draws = plain && period * 8 <= kMaxStep;
  if (draws) {
    for (uint64_t n = x % 256; n > 0; n--) {
      void* p = malloc(size_t(period * 8));
      if (!p) break;
      __asm__ volatile("" : : "r"(p) : "memory");  // keep the allocation
      free(p);
    }
  }
  const uint64_t span = draws ? period : period * 8;
  const uint64_t smallest = draws ? 1024 : 64 << 10;
  const uint64_t chunk = std::min(std::max(span / 64, smallest), kMaxStep);
  const uint64_t skip = y % (chunk * 64 < span ? chunk * 64 : span);
  for (uint64_t done = 0; done < skip; done += chunk) {
    void* p = malloc(size_t(chunk));
    if (!p) break;
    __asm__ volatile("" : : "r"(p) : "memory");
    free(p);
  }
  errno = saved;
  set_thread_active(was);
}

// Each of these touches jemalloc only where it serves: a call would boot
// it in an image that never allocates from it.
void set_active(bool on) {
  if (alloc_choice::jemalloc()) mallctl("prof.active", nullptr, nullptr, &on, sizeof on);
}

void set_thread_active(bool on) { swap_thread_active(on); }

bool swap_thread_active(bool on) {
  if (!alloc_choice::jemalloc()) return false;
  bool was = false;
  size_t sz = sizeof was;
  mallctl("thread.prof.active", &was, &sz, &on, sizeof on);
  return was;
}

void share_main_arena() {
  if (!alloc_choice::jemalloc()) return;
  // "thread.arena", resolved once to its MIB (a name lookup costs more than
  // the move); racing threads resolve it to the same values.
  static size_t mib[2];
  static std::atomic<size_t> miblen{0};
  size_t n = miblen.load(std::memory_order_acquire);
  if (n == 0) {
    size_t tmp[2], len = 2;
    if (profshim_je_mallctlnametomib("thread.arena", tmp, &len) != 0 || len > 2) return;
    memcpy(mib, tmp, sizeof tmp);
    miblen.store(len, std::memory_order_release);
    n = len;
  }
  unsigned zero = 0, was = 0;
  size_t sz = sizeof was;
  jemalloc_raw::ctl_by_mib(mib, n, &was, &sz, &zero, sizeof zero);
}

namespace {
thread_local unsigned t_private_arena;  // its index + 1, 0 for none
}  // namespace

void use_private_arena() {
  if (!alloc_choice::jemalloc()) return;
  unsigned idx = 0;
  size_t sz = sizeof idx;
  if (mallctl("arenas.create", &idx, &sz, nullptr, 0) == 0 &&
      mallctl("thread.arena", nullptr, nullptr, &idx, sizeof idx) == 0)
    t_private_arena = idx + 1;
}

void trim_private_arena() {
  if (!t_private_arena) return;
  // Freed blocks cached for this thread keep their slabs from being free.
  mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
  char name[32];
  snprintf(name, sizeof name, "arena.%u.purge", t_private_arena - 1);
  mallctl(name, nullptr, nullptr, nullptr, 0);
}

bool dump(std::string* text, std::string* err) {
  // A memfd keeps the raw dump off the user's disk. jemalloc creat()s the
  // name it is given; a path that reopened the memfd (/proc/thread-self/fd/N)
  // failed in a program that changed its root or runs without /proc.
  int fd = memfd_create("profshim-heap", MFD_CLOEXEC);
  if (fd < 0) {
    *err = std::string("memfd_create: ") + strerror(errno);
    return false;
  }
  const char* p = kDumpName;
  t_dump_fd = fd + 1;
  const int rc = mallctl("prof.dump", nullptr, nullptr, &p, sizeof p);
  t_dump_fd = 0;
  if (rc != 0) {
    *err = "jemalloc could not dump the heap profile (prof.dump)";
    close(fd);
    return false;
  }
  text->clear();
  char buf[65536];
  off_t off = 0;
  for (;;) {
    ssize_t r = pread(fd, buf, sizeof buf, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    text->append(buf, size_t(r));
    off += r;
  }
  close(fd);
  return true;
}

uint64_t allocated() {
  if (!alloc_choice::jemalloc()) return 0;
  jemalloc_raw::refresh();
  return jemalloc_raw::stat("stats.allocated");
}

bool give_back() {
  if (!alloc_choice::jemalloc()) return malloc_trim(0), true;
  mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
  return mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0) == 0;  // 4096: every arena
}

bool serves_malloc() {
  void* seen = dlsym(RTLD_DEFAULT, "malloc");
  return seen == reinterpret_cast<void*>(&malloc);
}

}  // namespace heap
