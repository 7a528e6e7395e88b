// stack_table: see stack_table.h.
#include "stack_table.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "sys.h"

namespace stack_table {

namespace {
constexpr uint32_t kTableSize = 1u << 16;       // distinct (thread, tag, stack) entries
// Reserved, touched as used. Under a limit on address space or data
// (ulimit -v, -d) reserving counts against the program's share as using
// does: an eighth of each, so that two tables take about 12 MiB, not 50.
constexpr uint64_t kArenaWords = 1ull << 21;    // 16 MiB of PCs
constexpr uint32_t kMaxNames = 1u << 18;        // threads named, by serial
constexpr uint32_t kMaxRenames = 1024;          // serials for a thread's new name (serial_now)
uint64_t g_arena_words = kArenaWords;
uint32_t g_max_names = kMaxNames;

constexpr int kProbe = 64;
// An entry's state word.
enum : uint32_t { kEmpty = 0, kWriting, kReady };
// A hash slot being filled (else 0, empty, or its entry's index + 1).
constexpr uint32_t kClaimed = ~0u;
}  // namespace

struct Table::Entry {
  std::atomic<uint32_t> state;
  int32_t tid;
  uint32_t serial;
  uint32_t depth;
  uint32_t tag;
  uint64_t hash;
  uint64_t off;
  std::atomic<uint64_t> count, weight;
};

struct Table::Name { int32_t tid; char name[16]; };

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

bool Table::map(const char* what, std::string* err) {
  if (sys::memory_limited()) g_arena_words = kArenaWords / 8, g_max_names = kMaxNames / 8;
  entries_ = static_cast<Entry*>(sys::map_own(sizeof(Entry) * kTableSize));
  slots_ = static_cast<uint32_t*>(sys::map_own(sizeof(uint32_t) * kTableSize));
  arena_ = static_cast<uint64_t*>(sys::map_own(sizeof(uint64_t) * g_arena_words));
  names_ = static_cast<Name*>(sys::map_own(sizeof(Name) * g_max_names));
  log_ = static_cast<uint32_t*>(sys::map_own(sizeof(uint32_t) * kTableSize));
  if (!entries_ || !slots_ || !arena_ || !names_ || !log_) {
    *err = std::string("cannot map the ") + what + " table: " + strerror(errno);
    return false;
  }
  arena_used_ = 0, log_used_ = 0, entries_used_ = 0, dropped_ = 0, dropped_weight_ = 0, renames_ = 0;
  // A fork child starts from empty tables: the kernel gives it zero pages
  // in place of these, neither copying the parent's page tables at the
  // fork nor leaving the child to unmap and map them again (0.5-1 ms of
  // a PostgreSQL backend's ~50 ms on this VM, where every unmap of touched
  // pages flushes the TLB through the hypervisor). Where madvise refuses
  // (before Linux 4.14) the child maps fresh ones (renew).
  Region r[kRegions];
  regions(r);
  wiped_ = true;
  for (const Region& g : r) wiped_ = wiped_ && sys::wipe_on_fork(g.at, g.bytes);
  return true;
}

void Table::regions(Region out[kRegions]) const {
  out[0] = {entries_, sizeof(Entry) * kTableSize};
  out[1] = {slots_, sizeof(uint32_t) * kTableSize};
  out[2] = {arena_, sizeof(uint64_t) * g_arena_words};
  out[3] = {log_, sizeof(uint32_t) * kTableSize};
  out[4] = {names_, sizeof(Name) * g_max_names};
}

bool Table::renew(const char* what, std::string* err) {
  if (wiped_) {
    arena_used_ = 0, log_used_ = 0, entries_used_ = 0, dropped_ = 0, dropped_weight_ = 0, renames_ = 0;
    return true;
  }
  unmap();
  return map(what, err);
}

void Table::unmap() {
  Region r[kRegions];
  regions(r);
  for (const Region& g : r) munmap(g.at, g.bytes);
  entries_ = nullptr, slots_ = nullptr, arena_ = nullptr, names_ = nullptr, log_ = nullptr;
}

void Table::release_pages() {
  if (!entries_) return;
  Region r[kRegions];
  regions(r);
  for (int i = 0; i < kRegions - 1; ++i) sys::advise(r[i].at, r[i].bytes, MADV_DONTNEED);
}

void Table::publish(uint32_t idx) {
  uint64_t i = log_used_.fetch_add(1, std::memory_order_relaxed);
  if (i < kTableSize) __atomic_store_n(&log_[i], idx + 1, __ATOMIC_RELEASE);
}

bool Table::fill(Entry& e, uint64_t h, int32_t tid, uint32_t serial, uint32_t tag, const uint64_t* pcs,
                 uint32_t n, uint64_t count, uint64_t weight) {
  uint64_t off = arena_used_.fetch_add(n, std::memory_order_relaxed);
  if (off + n > g_arena_words) {
    e.depth = 0;  // matches nothing; skipped by for_each
    e.state.store(kReady, std::memory_order_release);
    drop(count, weight);
    return false;
  }
  memcpy(arena_ + off, pcs, n * sizeof(uint64_t));
  e.hash = h, e.tid = tid, e.serial = serial, e.tag = tag, e.depth = n, e.off = off;
  e.count.store(count, std::memory_order_relaxed);
  e.weight.store(weight, std::memory_order_relaxed);
  e.state.store(kReady, std::memory_order_release);
  publish(uint32_t(&e - entries_));
  return true;
}

Stack Table::stack_of(const Entry& e, uint64_t order) const {
  return {arena_ + e.off, e.depth, e.tid, e.serial, e.count.load(), e.weight.load(), e.tag, uint32_t(order)};
}

uint32_t Table::add(const uint64_t* pcs, uint32_t n, int32_t tid, uint32_t serial, uint32_t tag, uint64_t count,
                    uint64_t weight, bool* created) {
  if (created) *created = false;
  uint64_t h = mix(mix(0, serial), tag);
  for (uint32_t i = 0; i < n; ++i) h = mix(h, pcs[i]);
  // The hash slots hold entry numbers; the entries are taken in order, so
  // a table of a few hundred stacks touches a few pages of them, not one
  // page per stack (entries placed by hash: ~1.4 MiB of a Go program's
  // peak RSS for its CPU table).
  for (int p = 0; p < kProbe; ++p) {
    uint32_t* slot = &slots_[(h + uint64_t(p)) & (kTableSize - 1)];
    uint32_t v = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (v == 0) {
      if (__atomic_compare_exchange_n(slot, &v, kClaimed, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        // A slot per entry: never more entries than slots.
        const uint64_t idx = entries_used_.fetch_add(1, std::memory_order_relaxed);
        if (idx >= kTableSize) {
          drop(count, weight);
          return 0;
        }
        Entry& e = entries_[idx];
        e.state.store(kWriting, std::memory_order_relaxed);
        const bool filled = fill(e, h, tid, serial, tag, pcs, n, count, weight);
        __atomic_store_n(slot, uint32_t(idx) + 1, __ATOMIC_RELEASE);  // (unfilled: depth 0, matches nothing)
        if (!filled) return 0;
        if (created) *created = true;
        return uint32_t(idx) + 1;
      }
    }
    if (v == kClaimed) continue;  // another writer's, unfinished: the next slot
    Entry& e = entries_[v - 1];
    if (e.state.load(std::memory_order_acquire) == kReady && e.hash == h && e.serial == serial && e.tag == tag &&
        e.depth == n && memcmp(arena_ + e.off, pcs, n * sizeof(uint64_t)) == 0) {
      e.count.fetch_add(count, std::memory_order_relaxed);
      e.weight.fetch_add(weight, std::memory_order_relaxed);
      return v;
    }
  }
  drop(count, weight);
  return 0;
}

void Table::add_to(uint32_t ref, uint64_t count, uint64_t weight) {
  Entry& e = entries_[ref - 1];
  e.count.fetch_add(count, std::memory_order_relaxed);
  e.weight.fetch_add(weight, std::memory_order_relaxed);
}

void Table::drop(uint64_t count, uint64_t weight) {
  dropped_.fetch_add(count, std::memory_order_relaxed);
  dropped_weight_.fetch_add(weight, std::memory_order_relaxed);
}

void Table::record_name(uint32_t serial, int32_t tid, const char* name) {
  if (!names_ || serial == 0 || serial >= g_max_names) return;
  Name& n = names_[serial];
  if (n.name[0]) return;  // recorded: a new name is a new serial
  n.tid = tid;
  size_t len = strnlen(name, sizeof n.name - 1);
  memcpy(n.name, name, len);
  n.name[len] = 0;
}

uint32_t Table::serial_now(uint32_t* serial, std::atomic<uint32_t>* serials, int32_t tid) {
  char now[17] = {0};
  if (prctl(PR_GET_NAME, now, 0, 0, 0) != 0) now[0] = 0;
  uint32_t s = *serial;
  // Past the names' room a thread keeps its serial: one name for the rest
  // of it rather than none.
  if (s && (!names_ || s >= g_max_names)) return s;
  if (s && (!names_[s].name[0] || strncmp(names_[s].name, now, sizeof names_[s].name) == 0)) {
    record_name(s, tid, now);
    return s;
  }
  if (s && (renames_.load(std::memory_order_relaxed) >= kMaxRenames ||
            renames_.fetch_add(1, std::memory_order_relaxed) >= kMaxRenames))
    return s;
  uint32_t next = serials->fetch_add(1, std::memory_order_relaxed) + 1;
  if (s && next >= g_max_names) return s;
  *serial = next;
  record_name(next, tid, now);
  return next;
}

std::string Table::name(uint32_t serial) const {
  if (!names_ || serial == 0 || serial >= g_max_names) return "";
  return names_[serial].name;
}

// Through the publication log, not the table: the stop's cost is that of
// the stacks recorded, not of the table's 3 MiB (a short image records a
// handful, and reading every slot faulted in every page of it).
void Table::for_each(void (*fn)(const Stack&, void*), void* arg) const {
  uint64_t from_start = 0;
  for_each_since(&from_start, fn, arg);
}

void Table::for_each_since(uint64_t* cursor, void (*fn)(const Stack&, void*), void* arg) const {
  if (!log_) return;
  uint64_t end = log_used_.load(std::memory_order_acquire);
  if (end > kTableSize) end = kTableSize;
  for (; *cursor < end; ++*cursor) {
    uint32_t v = __atomic_load_n(&log_[*cursor], __ATOMIC_ACQUIRE);
    if (v == 0) break;  // still being written: next time
    const Entry& e = entries_[v - 1];
    if (e.depth) fn(stack_of(e, *cursor), arg);
  }
}

}  // namespace stack_table
