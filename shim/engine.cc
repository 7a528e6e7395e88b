// engine: the list of engines and what they share; see engine.h.
#include "engine.h"

#include "procmaps.h"
#include "wrappers.h"

namespace engine {

// Each defined in its engine_KIND.cc. A new kind is one line here and its
// name in cli/kinds.py (a test compares the two).
extern const Engine kCpu, kHeap, kWait;

const Engine* const* all(int* n) {
  static const Engine* const kAll[] = {&kCpu, &kHeap, &kWait};
  *n = int(sizeof kAll / sizeof kAll[0]);
  return kAll;
}

void each_on(Hook Engine::*hook, bool backwards) {
  int n = 0;
  const Engine* const* engines = all(&n);
  for (int k = 0; k < n; ++k) {
    const Engine* e = engines[backwards ? n - 1 - k : k];
    if (e->*hook && e->on()) (e->*hook)();
  }
}

void quiet_thread() {
  int n = 0;
  const Engine* const* engines = all(&n);
  for (int i = 0; i < n; ++i)
    if (engines[i]->quiet_thread) engines[i]->quiet_thread();
}

int64_t Part::total(const char* type) const {
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i].type != type) continue;
    int64_t sum = 0;
    for (const auto& s : samples) sum += s.values[i];
    return sum;
  }
  return 0;
}

bool Self::in_text(uint64_t pc) const {
  for (const auto& r : text)
    if (pc >= r.lo && pc < r.hi) return true;
  return false;
}

// Matched by device, inode and path, not by the name LD_PRELOAD used, which
// may go through a symlink or "..".
Self self_ranges(const std::vector<procmaps::Line>& lines) {
  Self s;
  s.wrap = {wrappers::begin(), wrappers::end()};
  s.alloc = {wrappers::alloc_begin(), wrappers::alloc_end()};
  s.heap_profiling = {wrappers::heap_profiling_begin(), wrappers::heap_profiling_end()};
  uint64_t me = reinterpret_cast<uint64_t>(&self_ranges);
  for (const auto& mine : lines) {
    if (me < mine.start || me >= mine.end) continue;
    for (const auto& l : lines)
      if (l.same_file(mine)) s.text.push_back({l.start, l.end});
  }
  return s;
}

}  // namespace engine
