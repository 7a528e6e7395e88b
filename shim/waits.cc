// waits: the wait profile's engine; see waits.h.
#include "waits.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "lifecycle.h"
#include "sandbox.h"
#include "sigmask.h"
#include "stackwalk.h"
#include "sys.h"
#include "wrappers.h"

extern "C" const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

namespace waits {

Hot g_hot;
__thread uint64_t t_draw;

namespace {

constexpr int kMaxDepth = 128;

const char* const kNames[kCalls] = {
    "",
#define WAITS_CALL_NAME(id, name) name,
    WAITS_CALLS(WAITS_CALL_NAME)
#undef WAITS_CALL_NAME
};

struct State {
  stack_table::Table table;
  uint64_t rate_ns;
  uint64_t text_lo, text_hi;   // the shim's executable segment
  uint64_t tick0, mono0;       // a reading of both clocks, to turn ticks into nanoseconds
  std::atomic<uint32_t> serials;
  std::atomic<uint64_t> records;
};
State g;

__thread bool t_recording;   // this thread is inside record() (a handler's call passes through)
__thread uint32_t t_serial;  // this thread's serial in the table (a new one per name), 0 until its first record
__thread bool t_quiet;       // a thread of the shim's

uint64_t mono_ns() { return sys::now_ns(CLOCK_MONOTONIC); }

// The TSC is used where the kernel trusts it for its own clock (constant,
// synchronized across cores); else CLOCK_MONOTONIC through the vDSO, twice
// the cost per call (21 ns a read here against 9).
bool kernel_uses_tsc() {
  if (!arch::kHasTsc) return false;
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[16] = {0};
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n >= 3 && memcmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}

// Ticks per nanosecond over a short spin. 5 us puts R within ~0.5% of the
// rate asked for, which only moves the sampling period: the weights are
// unbiased in ticks (R in ticks), and ticks become nanoseconds by the ratio
// over the whole run. Every image pays the spin at setup (a 50 us one was a
// twentieth of a short image's cost).
// Each end is the tightest of a few TSC reads around a clock read (an
// interrupt between a lone pair would skew so short a spin by tens of
// percent): the clock's time against the middle of the two TSC reads.
void paired(uint64_t* mono, double* tsc) {
  uint64_t best = ~0ull;
  *mono = mono_ns(), *tsc = double(arch::tsc());
  for (int i = 0; i < 4; ++i) {
    uint64_t a = arch::tsc(), m = mono_ns(), b = arch::tsc();
    if (b - a < best) best = b - a, *mono = m, *tsc = double(a) + double(b - a) / 2;
  }
}

double calibrate() {
  uint64_t m0 = 0, m1 = 0;
  double t0 = 0, t1 = 0;
  paired(&m0, &t0);
  do paired(&m1, &t1);
  while (m1 - m0 < 5000);
  return (t1 - t0) / double(m1 - m0);
}

// The shim's own code: its executable segment, from its own ELF header
// (no loader lock).
void note_text() {
  const auto* eh = &__ehdr_start;
  const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(reinterpret_cast<const char*>(eh) + eh->e_phoff);
  uint64_t base = reinterpret_cast<uint64_t>(eh);
  for (int i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X)) continue;
    g.text_lo = base + ph[i].p_vaddr;
    g.text_hi = g.text_lo + ph[i].p_memsz;
  }
}

// Called from the shim's own code: its writer, its sampler's waits, its
// libstdc++. The allocator inside it is the program's: jemalloc's
// contended locks are the program's waits.
bool own_code(uint64_t pc) {
  return pc >= g.text_lo && pc < g.text_hi && !wrappers::in_alloc(pc);
}

void add(Call call, uint64_t d, const uint64_t* pcs, uint32_t n) {
  Weight w = weight(d, g_hot.rate);
  int32_t tid = int32_t(sys::gettid());
  uint32_t serial = 0;
  {
    // Its name as the wait ends (one prctl); a new name is a new serial.
    sandbox::OwnCalls own;
    serial = g.table.serial_now(&t_serial, &g.serials, tid);
  }
  g.table.add(pcs, n, tid, serial, call, w.count, w.delay);
  g.records.fetch_add(1, std::memory_order_relaxed);
}

// The stack above the wrapper: from the wrapper's caller outwards. The
// frames below (this function, record, the walk) are the shim's.
__attribute__((noinline)) void add_walked(Call call, uint64_t d) {
  uint64_t pcs[kMaxDepth];
  int n = stackwalk::here(pcs, kMaxDepth);
  int w = 0;
  // A stack that passes through two wrappers of hooks_wait.cc is a nested call.
  while (w < n && !wrappers::in_wait(stackwalk::pc_of(pcs[w]))) ++w;
  if (w + 1 >= n) return;
  for (int i = w + 1; i < n; ++i)
    if (wrappers::in_wait(stackwalk::pc_of(pcs[i]))) return;  // nested: the outer call holds this time
  add(call, d, pcs + w + 1, uint32_t(n - w - 1));
}

}  // namespace

const char* call_name(uint32_t call) { return call < kCalls ? kNames[call] : "?"; }

void record(Call call, uint64_t d, void* caller) {
  uint64_t ra = reinterpret_cast<uint64_t>(caller);
  if (!on() || t_recording || t_quiet || sigmask::internal() || own_code(ra - 1)) return;
  t_recording = true;
  // The table's log is read in order up to a slot still being written: a
  // stop on this thread, between the claim of a slot and its write, would
  // read no entry past it.
  stackwalk::Holding writing;
  int saved = errno;
  if (!lifecycle::in_vfork_child()) {
    if (stackwalk::room_here()) {
      add_walked(call, d);
    } else {
      add(call, d, &ra, 1);  // too little stack to walk: the caller alone
    }
  }
  errno = saved;
  t_recording = false;
}

void quiet_thread() { t_quiet = true; }

bool start(uint64_t rate_ns, std::string* err) {
  if (!g.table.map("wait profile", err)) return false;
  note_text();
  g.rate_ns = rate_ns;
  g_hot.tsc = kernel_uses_tsc();
  double per_ns = g_hot.tsc ? calibrate() : 1.0;
  g.mono0 = mono_ns();
  g.tick0 = now();
  uint64_t rate = uint64_t(double(rate_ns) * per_ns + 0.5);
  g_hot.rate = rate ? rate : 1;
  g_hot.scale = scale_for(g_hot.rate);
  g_hot.on.store(true, std::memory_order_release);
  return true;
}

void stop() { g_hot.on.store(false, std::memory_order_release); }

void resume() {
  if (g.table.mapped()) g_hot.on.store(true, std::memory_order_release);
}

void reset_after_fork() {
  if (!g.table.mapped()) return;
  std::string err;
  if (!g.table.renew("wait profile", &err)) {
    g_hot.on.store(false);
    return;
  }
  g.records.store(0);
}

namespace {
struct Convert {
  void (*fn)(const stack_table::Stack&, void*);
  void* arg;
  double ns_per_tick;
};
void converted(const stack_table::Stack& st, void* arg) {
  auto* c = static_cast<Convert*>(arg);
  stack_table::Stack s = st;
  s.count = (st.count + kOne / 2) / kOne;
  s.weight = uint64_t(double(st.weight) * c->ns_per_tick + 0.5);
  c->fn(s, c->arg);
}
}  // namespace

void for_each(void (*fn)(const stack_table::Stack&, void*), void* arg) {
  uint64_t ticks = now() - g.tick0, ns = mono_ns() - g.mono0;
  Convert c = {fn, arg, g_hot.tsc && ticks ? double(ns) / double(ticks) : 1.0};
  g.table.for_each(converted, &c);
}

void for_each_since(uint64_t* cursor, void (*fn)(const stack_table::Stack&, void*), void* arg) {
  g.table.for_each_since(cursor, fn, arg);
}

void release_table() { g.table.release_pages(); }

std::string thread_name(uint32_t serial) { return g.table.name(serial); }

uint64_t rate_ns() { return g.rate_ns; }

Stats stats() { return {g.records.load(), g.table.dropped()}; }

}  // namespace waits
