// engine_cpu: the CPU profiler's part of a set (engine.h). The sampler's
// table only grows, so a part is what each entry gained since the previous
// snapshot: its values then are kept by the entry's place in publication
// order. Consecutive snapshots and the stop's profile add up to the run; a
// stop does not move that mark (after a failed exec the image's next stop
// covers the same ground again, as it always has).
#include <unordered_map>
#include <utility>

#include "alloc_choice.h"
#include "engine.h"
#include "sampler.h"
#include "stackwalk.h"
#include "sys.h"

namespace engine {
namespace {

struct Mark { uint64_t count, nanos; };

struct State {
  // Where the next part begins: the image's start or the last snapshot.
  uint64_t window_mono, window_real;
  // Each entry's values at the last snapshot, by its place; allocated at
  // the first snapshot, so a run without one never has it.
  std::vector<Mark>* marks;
  uint64_t total_nanos;  // the whole run's, for the summary: the stop's table
};
State g;  // zero-initialised: no dynamic initialiser (DESIGN "Globals")

struct Walk {
  const Self* self;
  Part* part;
  bool advance;  // a snapshot: the marks move to now
  // jemalloc serves this image's malloc (the heap is profiled): a sample in
  // the allocator is in the shim's jemalloc, not the program's allocator.
  bool jemalloc;
  uint64_t run_nanos;  // the whole table's, since the image began
  std::unordered_map<uint32_t, std::string> names;
};

std::vector<pprof::Label> labels_of(const sampler::Stack& st, Walk* w) {
  auto n = w->names.find(st.serial);
  if (n == w->names.end()) n = w->names.emplace(st.serial, sampler::thread_name(st.serial)).first;
  std::vector<pprof::Label> ls(1);
  ls[0].key = "thread_id", ls[0].num = st.tid, ls[0].is_num = true;
  if (!n->second.empty()) {
    pprof::Label nm;
    nm.key = "thread_name", nm.str = n->second;
    ls.push_back(nm);
  }
  return ls;
}

void add(const sampler::Stack& st, void* arg) {
  Walk* w = static_cast<Walk*>(arg);
  Mark was = {0, 0};
  if (g.marks && st.order < g.marks->size()) was = (*g.marks)[st.order];
  if (w->advance) {
    if (st.order >= g.marks->size()) g.marks->resize(size_t(st.order) + 1, Mark{0, 0});
    (*g.marks)[st.order] = {st.count, st.nanos};
  }
  uint64_t count = st.count >= was.count ? st.count - was.count : st.count;
  uint64_t nanos = st.nanos >= was.nanos ? st.nanos - was.nanos : st.nanos;
  Sample s;
  const char* shims = nullptr;
  for (uint32_t i = 0; i < st.depth; ++i) {
    uint64_t addr = stackwalk::lookup_addr(st.pcs[i]);
    if (w->self->in_heap_profiling(addr))
      shims = "heap-profiling";
    else if (!shims && w->jemalloc && w->self->in_alloc(addr))
      shims = "allocator";
    if (!w->self->shim_own(addr)) s.addrs.push_back(addr);
  }
  if (s.addrs.empty()) return;  // all the shim's (its own threads are not sampled)
  w->run_nanos += st.nanos;
  if (!count && !nanos) return;
  s.values = {int64_t(count), int64_t(nanos)};
  s.labels = labels_of(st, w);
  if (shims) {
    // What the program pays for being profiled, apart from its own work
    // (docs/CONTRACT.md, labels): -tagignore=profshim=heap-profiling.
    pprof::Label l;
    l.key = "profshim", l.str = shims;
    s.labels.push_back(l);
  }
  w->part->samples.push_back(std::move(s));
}

bool on() { return sampler::period_ns() != 0; }

void begin(const When& now) {
  g.window_mono = now.mono_ns, g.window_real = now.real_ns;
  g.marks = nullptr;  // a fork child's table is new (the parent's marks are left as they were)
}

void halt() { sampler::stop(); }

bool collect(Why why, const When& when, const Self& self, Part* out, std::string* err) {
  if (why == Why::kPeak) return false;
  bool snapshot = why == Why::kSnapshot;
  if (snapshot) {
    sampler::record_names();
    if (!g.marks) g.marks = new std::vector<Mark>();
  }
  out->kind = "cpu";
  out->types = {{"samples", "count"}, {"cpu", "nanoseconds"}};
  out->default_type = "cpu";
  out->period_type = {"cpu", "nanoseconds"};
  out->period = int64_t(sampler::period_ns());
  out->time_ns = int64_t(g.window_real);
  out->duration_ns = int64_t(when.mono_ns > g.window_mono ? when.mono_ns - g.window_mono : 0);
  Walk w{&self, out, snapshot, alloc_choice::jemalloc(), 0, {}};
  sampler::for_each(add, &w);
  if (snapshot)
    g.window_mono = when.mono_ns, g.window_real = when.real_ns;
  else
    g.total_nanos = w.run_nanos;
  return true;
}

void figures(const Part* part, summary::Figures* f) {
  sampler::Stats st = sampler::stats();
  f->samples = st.expirations;
  f->signals = st.signals;
  f->credited = st.credited;
  f->dropped = st.dropped;
  f->dropped_s = double(st.dropped_nanos) / 1e9;
  f->unsampled_threads = st.timer_failures;
  f->stacks_cut = st.cut;
  f->profiled_cpu_s = double(g.total_nanos) / 1e9;
}

}  // namespace

const Engine kCpu = {"cpu", on, begin, halt, collect, figures};

}  // namespace engine
