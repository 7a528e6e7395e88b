// stack_table: see stack_table.h.
#include "stack_table.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>

namespace stack_table {
namespace {

constexpr uint32_t kTableSize = 1u << 16;       // distinct (stack, thread) pairs
constexpr uint64_t kArenaWords = 1ull << 21;    // 16 MiB of PCs, touched as used
constexpr uint32_t kMaxNames = 1u << 18;        // threads named, by serial
constexpr int kProbe = 64;

struct Entry {
  std::atomic<uint32_t> state;  // 0 empty, 1 being written, 2 ready
  int32_t tid;
  uint32_t serial;
  uint32_t depth;
  uint64_t hash;
  uint64_t off;
  std::atomic<uint64_t> count, nanos;
};

struct Name { int32_t tid; char name[16]; };

struct State {
  Entry* table;
  uint64_t* arena;
  Name* names;          // by serial
  uint32_t* log;        // entry index + 1, in the order entries were published
  std::atomic<uint64_t> arena_used, log_used;
  std::atomic<uint64_t> dropped, dropped_nanos;
};
State g;

void* map_zeroed(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

bool same_stack(const Entry& e, uint64_t h, uint32_t serial, const uint64_t* pcs, uint32_t n) {
  return e.hash == h && e.serial == serial && e.depth == n &&
         memcmp(g.arena + e.off, pcs, n * sizeof(uint64_t)) == 0;
}

void publish(uint32_t idx) {
  uint64_t i = g.log_used.fetch_add(1, std::memory_order_relaxed);
  if (i < kTableSize) __atomic_store_n(&g.log[i], idx + 1, __ATOMIC_RELEASE);
}

bool fill(Entry& e, uint64_t h, int32_t tid, uint32_t serial, const uint64_t* pcs, uint32_t n, uint64_t count,
          uint64_t nanos) {
  uint64_t off = g.arena_used.fetch_add(n, std::memory_order_relaxed);
  if (off + n > kArenaWords) {
    e.depth = 0;  // matches nothing; skipped by for_each
    e.state.store(2, std::memory_order_release);
    drop(count, nanos);
    return false;
  }
  memcpy(g.arena + off, pcs, n * sizeof(uint64_t));
  e.hash = h, e.tid = tid, e.serial = serial, e.depth = n, e.off = off;
  e.count.store(count, std::memory_order_relaxed);
  e.nanos.store(nanos, std::memory_order_relaxed);
  e.state.store(2, std::memory_order_release);
  publish(uint32_t(&e - g.table));
  return true;
}

sampler::Stack stack_of(const Entry& e, uint64_t order) {
  return {g.arena + e.off, e.depth, e.tid, e.serial, e.count.load(), e.nanos.load(), uint32_t(order)};
}

}  // namespace

bool map(std::string* err) {
  g.table = static_cast<Entry*>(map_zeroed(sizeof(Entry) * kTableSize));
  g.arena = static_cast<uint64_t*>(map_zeroed(sizeof(uint64_t) * kArenaWords));
  g.names = static_cast<Name*>(map_zeroed(sizeof(Name) * kMaxNames));
  g.log = static_cast<uint32_t*>(map_zeroed(sizeof(uint32_t) * kTableSize));
  if (!g.table || !g.arena || !g.names || !g.log) {
    *err = std::string("cannot map the CPU sample table: ") + strerror(errno);
    return false;
  }
  g.arena_used = 0, g.log_used = 0, g.dropped = 0, g.dropped_nanos = 0;
  return true;
}

void unmap() {
  munmap(g.table, sizeof(Entry) * kTableSize);
  munmap(g.arena, sizeof(uint64_t) * kArenaWords);
  munmap(g.names, sizeof(Name) * kMaxNames);
  munmap(g.log, sizeof(uint32_t) * kTableSize);
}

bool mapped() { return g.table != nullptr; }

uint32_t add(const uint64_t* pcs, uint32_t n, int32_t tid, uint32_t serial, uint64_t count, uint64_t nanos) {
  uint64_t h = mix(0, serial);
  for (uint32_t i = 0; i < n; ++i) h = mix(h, pcs[i]);
  for (int p = 0; p < kProbe; ++p) {
    Entry& e = g.table[(h + uint64_t(p)) & (kTableSize - 1)];
    uint32_t st = e.state.load(std::memory_order_acquire);
    if (st == 0) {
      uint32_t zero = 0;
      if (e.state.compare_exchange_strong(zero, 1, std::memory_order_acq_rel))
        return fill(e, h, tid, serial, pcs, n, count, nanos) ? uint32_t(&e - g.table) + 1 : 0;
      st = e.state.load(std::memory_order_acquire);
    }
    if (st == 2 && same_stack(e, h, serial, pcs, n)) {
      e.count.fetch_add(count, std::memory_order_relaxed);
      e.nanos.fetch_add(nanos, std::memory_order_relaxed);
      return uint32_t(&e - g.table) + 1;
    }
  }
  drop(count, nanos);
  return 0;
}

void add_to(uint32_t ref, uint64_t count, uint64_t nanos) {
  Entry& e = g.table[ref - 1];
  e.count.fetch_add(count, std::memory_order_relaxed);
  e.nanos.fetch_add(nanos, std::memory_order_relaxed);
}

void drop(uint64_t count, uint64_t nanos) {
  g.dropped.fetch_add(count, std::memory_order_relaxed);
  g.dropped_nanos.fetch_add(nanos, std::memory_order_relaxed);
}

uint64_t dropped() { return g.dropped.load(); }
uint64_t dropped_nanos() { return g.dropped_nanos.load(); }

void record_name(uint32_t serial, int32_t tid, const char* name) {
  if (!g.names || serial == 0 || serial >= kMaxNames) return;
  Name& n = g.names[serial];
  n.tid = tid;
  size_t len = strnlen(name, sizeof n.name - 1);
  memcpy(n.name, name, len);
  n.name[len] = 0;
}

std::string name(uint32_t serial) {
  if (!g.names || serial == 0 || serial >= kMaxNames) return "";
  return g.names[serial].name;
}

// Through the publication log, not the table: the stop's cost is that of
// the stacks recorded, not of the table's 3 MiB (a short image records a
// handful, and reading every slot faulted in every page of it).
void for_each(void (*fn)(const sampler::Stack&, void*), void* arg) {
  uint64_t from_start = 0;
  stack_table::for_each_since(&from_start, fn, arg);
}

void for_each_since(uint64_t* cursor, void (*fn)(const sampler::Stack&, void*), void* arg) {
  if (!g.log) return;
  uint64_t end = g.log_used.load(std::memory_order_acquire);
  if (end > kTableSize) end = kTableSize;
  for (; *cursor < end; ++*cursor) {
    uint32_t v = __atomic_load_n(&g.log[*cursor], __ATOMIC_ACQUIRE);
    if (v == 0) break;  // still being written: next time
    Entry& e = g.table[v - 1];
    if (e.depth) fn(stack_of(e, *cursor), arg);
  }
}

}  // namespace stack_table
