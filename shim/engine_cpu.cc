// engine_cpu: the CPU profiler as an engine (engine.h): the sampler's
// timers (sampler.h) and its stack table, whose parts engine_table.h cuts
// into snapshots.
#include <string>

#include "alloc_choice.h"
#include "engine.h"
#include "engine_table.h"
#include "sampler.h"
#include "sandbox.h"

namespace engine {
namespace {

TableDelta g_delta;  // zero-initialised: no dynamic initialiser (DESIGN "Globals")

// What the program pays for being profiled, apart from its own work
// (docs/CONTRACT.md, labels): a sample in the heap profile's own code, or,
// while jemalloc serves the program (the heap is profiled), in the
// allocator inside the shim. -tagignore=profshim=heap-profiling.
// Reads s->addrs, already looked up and stripped of the shim's own frames
// only: the allocator's and the heap profile's are kept there (Self).
void dress(const stack_table::Stack&, const Self& self, Sample* s) {
  const char* shims = nullptr;
  bool jemalloc = alloc_choice::jemalloc();
  for (uint64_t addr : s->addrs) {
    if (self.in_heap_profiling(addr)) {
      shims = "heap-profiling";
      break;
    }
    if (jemalloc && !shims && self.in_alloc(addr)) shims = "allocator";
  }
  if (!shims) return;
  pprof::Label l;
  l.key = "profshim", l.str = shims;
  s->labels.push_back(l);
}

const TableSource kSource = {sampler::for_each, sampler::thread_name, dress, /*weight_alone=*/true};

bool start(const config::Config& cfg, std::string* err) { return !cfg.cpu_hz || sampler::start(cfg.cpu_hz, err); }

bool on() { return sampler::period_ns() != 0; }

void begin(const When& now) { g_delta.begin(now); }

void halt() { sampler::stop(); }

// The sampler keeps a child under its parent's filter unarmed itself.
void after_fork_in_child() { sampler::reset_after_fork(); }

void resume() {
  if (!sandbox::running_forbidden()) sampler::resume();
}

bool collect(Why why, const When& when, const Self& self, Part* out, std::string* err) {
  if (why == Why::kPeak) return false;
  bool snapshot = why == Why::kSnapshot;
  if (snapshot) sampler::record_names();
  out->kind = "cpu";
  out->types = {{"samples", "count"}, {"cpu", "nanoseconds"}};
  out->default_type = "cpu";
  out->period_type = {"cpu", "nanoseconds"};
  out->period = int64_t(sampler::period_ns());
  g_delta.collect(kSource, snapshot, when, self, out);
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
  f->profiled_cpu_s = double(g_delta.run_weight()) / 1e9;
}

}  // namespace

extern const Engine kCpu;  // engine.cc's all()
const Engine kCpu = {
    .name = "cpu",
    .start = start,
    .on = on,
    .begin = begin,
    .halt = halt,
    .before_fork = sampler::quiesce_for_fork,
    .after_fork_in_parent = sampler::resume_after_fork_in_parent,
    .after_fork_in_child = after_fork_in_child,
    .resume = resume,
    .sandboxed = sampler::stop,
    .for_each_since = sampler::for_each_since,
    .table = &kSource,
    .collect = collect,
    .figures = figures,
    .release = sampler::release_table,
};

}  // namespace engine
