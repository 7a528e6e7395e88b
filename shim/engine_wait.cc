// engine_wait: the wait profile's part of a set (engine.h), as Go's block
// profile (runtime/pprof, printCountCycleProfile): contentions and delay,
// period 1 contention. Each sample's leaf is the blocking call itself, by
// its libc name (Sample::leaf); the label `call` says it too, for
// -tagfocus. As engine_cpu.cc, a snapshot's part is what each entry gained
// since the previous snapshot (marks by publication order), so numbered
// sets and the stop's file add up to the run; a stop does not move them.
#include <unordered_map>
#include <utility>

#include "engine.h"
#include "stackwalk.h"
#include "waits.h"

namespace engine {
namespace {

struct Mark { uint64_t count, nanos; };

struct State {
  uint64_t window_mono, window_real;  // where the next part begins
  std::vector<Mark>* marks;  // each entry's values at the last snapshot; from the first one
  uint64_t total_nanos;      // the whole run's delay, for the summary
};
State g;  // zero-initialised: no dynamic initialiser (DESIGN "Globals")

struct Walk {
  const Self* self;
  Part* part;
  bool advance;  // a snapshot: the marks move to now
  uint64_t run_nanos;
  std::unordered_map<uint32_t, std::string> names;
};

// Values only grow, but a delay is turned from clock ticks into
// nanoseconds at each reading with the ratio measured so far: a reading
// may come out a hair below the previous one. Such a fall counts as no
// gain, and the mark stays where it was.
uint64_t gained(uint64_t now, uint64_t* mark, bool advance) {
  uint64_t was = *mark;
  if (advance && now > was) *mark = now;
  return now > was ? now - was : 0;
}

// A wait stack starts at the blocking call's caller (waits.h); the
// program's frames are kept as the CPU profile keeps them.
void add(const stack_table::Stack& st, void* arg) {
  Walk* w = static_cast<Walk*>(arg);
  Sample s;
  for (uint32_t i = 0; i < st.depth; ++i) {
    uint64_t addr = stackwalk::lookup_addr(st.pcs[i]);
    if (!w->self->shim_own(addr)) s.addrs.push_back(addr);
  }
  if (s.addrs.empty()) return;
  w->run_nanos += st.nanos;
  Mark none = {0, 0}, *m = &none;
  if (g.marks) {
    if (w->advance && st.order >= g.marks->size()) g.marks->resize(size_t(st.order) + 1, Mark{0, 0});
    if (st.order < g.marks->size()) m = &(*g.marks)[st.order];
  }
  uint64_t count = gained(st.count, &m->count, w->advance);
  uint64_t nanos = gained(st.nanos, &m->nanos, w->advance);
  if (!count) return;  // rounds to no contention (waits.cc keeps fractions)
  s.values = {int64_t(count), int64_t(nanos)};
  s.leaf = waits::call_name(st.tag);
  pprof::Label call;
  call.key = "call", call.str = s.leaf;
  pprof::Label id;
  id.key = "thread_id", id.num = st.tid, id.is_num = true;
  s.labels = {call, id};
  auto n = w->names.find(st.serial);
  if (n == w->names.end()) n = w->names.emplace(st.serial, waits::thread_name(st.serial)).first;
  if (!n->second.empty()) {
    pprof::Label nm;
    nm.key = "thread_name", nm.str = n->second;
    s.labels.push_back(nm);
  }
  w->part->samples.push_back(std::move(s));
}

bool on() { return waits::rate_ns() != 0; }

void begin(const When& now) {
  g.window_mono = now.mono_ns, g.window_real = now.real_ns;
  g.marks = nullptr;  // a fork child's table is new (the parent's marks are left as they were)
}

void halt() { waits::stop(); }

bool collect(Why why, const When& when, const Self& self, Part* out, std::string*) {
  if (why == Why::kPeak) return false;
  bool snapshot = why == Why::kSnapshot;
  if (snapshot && !g.marks) g.marks = new std::vector<Mark>();
  out->kind = "wait";
  out->types = {{"contentions", "count"}, {"delay", "nanoseconds"}};
  out->default_type = "delay";
  out->period_type = {"contentions", "count"};
  out->period = 1;
  out->time_ns = int64_t(g.window_real);
  out->duration_ns = int64_t(when.mono_ns > g.window_mono ? when.mono_ns - g.window_mono : 0);
  out->comments = {"profshim: PROFILE_WAIT_SAMPLE=" + std::to_string(waits::rate_ns()) +
                   " ns of waiting per sample"};
  Walk w{&self, out, snapshot, 0, {}};
  waits::for_each(add, &w);
  if (snapshot)
    g.window_mono = when.mono_ns, g.window_real = when.real_ns;
  else
    g.total_nanos = w.run_nanos;
  return true;
}

void figures(const Part*, summary::Figures* f) {
  f->wait_on = on();
  f->wait_s = double(g.total_nanos) / 1e9;
}

}  // namespace

const Engine kWait = {"wait", on, begin, halt, collect, figures};

}  // namespace engine
