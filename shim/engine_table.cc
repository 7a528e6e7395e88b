// engine_table: see engine_table.h.
#include "engine_table.h"

#include <unordered_map>
#include <utility>

#include "stackwalk.h"

namespace engine {
namespace {

struct Walk {
  const TableSource* src;
  const Self* self;
  Part* part;
  std::vector<TableDelta::Mark>* marks;
  bool advance;  // a snapshot: the marks move to now
  uint64_t run_weight;  // the whole table's, since the image began
  std::unordered_map<uint32_t, std::string> names;
};

// Values only grow, but the wait profile turns a delay from clock ticks
// into nanoseconds at each reading with the ratio measured so far: a
// reading may come out a hair below the previous one. Such a fall counts as
// no gain, and the mark stays where it was.
uint64_t gained(uint64_t now, uint64_t* mark, bool advance) {
  uint64_t was = *mark;
  if (advance && now > was) *mark = now;
  return now > was ? now - was : 0;
}

void label_thread(int32_t tid, const std::string& name, Sample* s) {
  pprof::Label id;
  id.key = "thread_id", id.num = tid, id.is_num = true;
  s->labels.push_back(id);
  if (!name.empty()) {
    pprof::Label nm;
    nm.key = "thread_name", nm.str = name;
    s->labels.push_back(nm);
  }
}

void add_thread(const stack_table::Stack& st, Walk* w, Sample* s) {
  auto n = w->names.find(st.serial);
  if (n == w->names.end()) n = w->names.emplace(st.serial, w->src->thread_name(st.serial)).first;
  label_thread(st.tid, n->second, s);
}

// The program's frames only: work of the shim's on a program's thread is
// shown at the program's call (engine.h's Self).
void program_frames(const stack_table::Stack& st, const Self& self, Sample* s) {
  for (uint32_t i = 0; i < st.depth; ++i) {
    uint64_t addr = stackwalk::lookup_addr(st.pcs[i]);
    if (!self.shim_own(addr)) s->addrs.push_back(addr);
  }
}

void add(const stack_table::Stack& st, void* arg) {
  Walk* w = static_cast<Walk*>(arg);
  Sample s;
  program_frames(st, *w->self, &s);
  if (s.addrs.empty()) return;  // all the shim's (its own threads are not sampled)
  w->run_weight += st.weight;
  TableDelta::Mark none = {0, 0}, *m = &none;
  if (w->marks) {
    if (w->advance && st.order >= w->marks->size()) w->marks->resize(size_t(st.order) + 1, TableDelta::Mark{0, 0});
    if (st.order < w->marks->size()) m = &(*w->marks)[st.order];
  }
  uint64_t count = gained(st.count, &m->count, w->advance);
  uint64_t weight = gained(st.weight, &m->weight, w->advance);
  if (!count && !(w->src->weight_alone && weight)) return;
  s.values = {int64_t(count), int64_t(weight)};
  if (w->src->dress) w->src->dress(st, *w->self, &s);
  add_thread(st, w, &s);
  w->part->samples.push_back(std::move(s));
}

}  // namespace

bool table_sample_of(const TableSource& src, const stack_table::Stack& st, const std::string& thread_name,
                     const Self& self, Sample* out) {
  program_frames(st, self, out);
  if (out->addrs.empty() || (!st.count && !(src.weight_alone && st.weight))) return false;
  out->values = {int64_t(st.count), int64_t(st.weight)};
  if (src.dress) src.dress(st, self, out);
  label_thread(st.tid, thread_name, out);
  return true;
}

void TableDelta::begin(const When& now) {
  window_mono_ = now.mono_ns, window_real_ = now.real_ns;
  marks_ = nullptr;
}

void TableDelta::collect(const TableSource& src, bool snapshot, const When& when, const Self& self, Part* out) {
  if (snapshot && !marks_) marks_ = new std::vector<Mark>();
  out->time_ns = int64_t(window_real_);
  out->duration_ns = int64_t(when.mono_ns > window_mono_ ? when.mono_ns - window_mono_ : 0);
  Walk w{&src, &self, out, marks_, snapshot, 0, {}};
  src.for_each(add, &w);
  if (snapshot)
    window_mono_ = when.mono_ns, window_real_ = when.real_ns;
  else
    run_weight_ = w.run_weight;
}

}  // namespace engine
