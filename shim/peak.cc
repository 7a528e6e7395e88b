// peak: the allocation-path check for a new heap peak; see peak.h.
#include "peak.h"

#include <stddef.h>

#include <atomic>

#include "go_stacks.h"
#include "jemalloc_raw.h"
#include "sys.h"
#include "wrappers.h"

// jemalloc's pages held from the system, less what it retains unmapped
// (src/extent.c: curpages, maintained for prof_gdump); made global and
// renamed in the build's copy of the archive (Makefile). An atomic_zu_t is
// one size_t.
extern "C" __attribute__((visibility("hidden"))) size_t profshim_je_curpages;

namespace peak {
namespace {

using Backtrace = void (*)(void**, unsigned*, unsigned);

constexpr uint64_t kFirstBackoffNs = 1000000000ull, kMaxBackoffNs = 16000000000ull;

struct State {
  Backtrace jemallocs;  // the unwind jemalloc would have done
  bool (*wake)();
  uint64_t floor;
  uint64_t page;  // jemalloc's page (arenas.page): 4 KiB on x86-64, 64 KiB on arm64 (Makefile)
  uint64_t after_ns;  // PROFILE_PEAK_AFTER
  uint64_t age_ns;    // when this image is old enough (CLOCK_MONOTONIC)
  std::atomic<bool> on;
  std::atomic<uint64_t> trigger_pages;  // at or above: maybe a new peak
  std::atomic<uint64_t> recheck_pages;  // after a check that found none: this many pages, or
  std::atomic<uint64_t> not_before_ns;  // this moment (also the age rule)
  std::atomic<uint64_t> backoff_ns;
  std::atomic<uint64_t> written;        // in use in the last peak file
  std::atomic<bool> asked;
};
State g;  // zero-initialised: no dynamic initialiser (DESIGN "Globals")

uint64_t pages_now() { return __atomic_load_n(&profshim_je_curpages, __ATOMIC_RELAXED); }

uint64_t pages_for(uint64_t bytes) { return (bytes + g.page - 1) / g.page; }

__attribute__((noinline)) void check(uint64_t pages) {
  if (g.asked.load(std::memory_order_relaxed)) return;  // the worker has it
  bool grown = pages >= g.recheck_pages.load(std::memory_order_relaxed);
  uint64_t now = sys::now_ns(CLOCK_MONOTONIC);
  uint64_t not_before = g.not_before_ns.load(std::memory_order_relaxed);
  if (now < not_before && !(grown && now >= g.age_ns)) return;
  if (g.asked.exchange(true)) return;
  if (!g.wake()) g.asked.store(false);
}

// In the allocator's range: jemalloc's unwind starts inside this frame,
// and every heap stack is cut at the allocation call (wrappers.h); in the
// heap profile's own part of it, as this is the shim's cost.
PROFSHIM_HEAP_PROFILING void hook(void** vec, unsigned* len, unsigned max) {
  g.jemallocs(vec, len, max);
  *len = go_stacks::after_c_frame(vec, *len, max);  // an allocation in C called from Go
  if (!g.on.load(std::memory_order_relaxed)) return;
  uint64_t pages = pages_now();
  if (pages >= g.trigger_pages.load(std::memory_order_relaxed)) check(pages);
}

uint64_t next_threshold(uint64_t written) {
  uint64_t grown = uint64_t(double(written) * kGrowth);
  return grown > g.floor ? grown : g.floor;
}

}  // namespace

bool setup(uint64_t floor_bytes, uint64_t after_ms, bool (*wake)(), const char** err) {
  g.floor = floor_bytes;
  g.after_ns = after_ms * 1000000ull;
  g.wake = wake;
  size_t page = 0, page_sz = sizeof page;
  if (jemalloc_raw::ctl("arenas.page", &page, &page_sz, nullptr, 0) != 0 || page == 0) {
    *err = "jemalloc did not say its page size (arenas.page)";
    return false;
  }
  g.page = page;
  size_t sz = sizeof g.jemallocs;
  Backtrace mine = hook;
  if (jemalloc_raw::ctl("experimental.hooks.prof_backtrace", &g.jemallocs, &sz, &mine, sizeof mine) != 0 ||
      !g.jemallocs) {
    *err = "jemalloc refused the heap-peak hook (experimental.hooks.prof_backtrace)";
    return false;
  }
  g.on.store(floor_bytes != 0);
  return true;
}

bool on() { return g.on.load(std::memory_order_relaxed); }

void begin(uint64_t start_mono_ns) {
  uint64_t age = start_mono_ns + g.after_ns;
  g.age_ns = age;
  g.written.store(0);
  g.asked.store(false);
  g.backoff_ns.store(kFirstBackoffNs);
  g.recheck_pages.store(0);
  g.not_before_ns.store(age);
  g.trigger_pages.store(pages_for(g.floor));
}

bool asked() { return g.asked.load(); }

uint64_t threshold() { return next_threshold(g.written.load()); }

void no_peak() {
  uint64_t backoff = g.backoff_ns.load();
  g.recheck_pages.store(uint64_t(double(pages_now()) * kGrowth));
  g.not_before_ns.store(sys::now_ns(CLOCK_MONOTONIC) + backoff);
  g.backoff_ns.store(backoff * 2 < kMaxBackoffNs ? backoff * 2 : kMaxBackoffNs);
  g.asked.store(false);
}

void written(uint64_t inuse_bytes) {
  g.written.store(inuse_bytes);
  g.backoff_ns.store(kFirstBackoffNs);
  g.recheck_pages.store(0);
  g.not_before_ns.store(g.age_ns);
  uint64_t trigger = pages_for(next_threshold(inuse_bytes));
  g.trigger_pages.store(trigger);
  // The dump just written may be older than the heap: one taken at the
  // floor while the program climbed on to 200 MiB and then only held it
  // would be the last, as no allocation would ask again. Still past the
  // next threshold: the worker stays asked, and dumps again when its rate
  // allows.
  if (pages_now() >= trigger) return;
  g.asked.store(false);
}

uint64_t last_written() { return g.written.load(); }

}  // namespace peak
