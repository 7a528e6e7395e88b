// finish: the stop pipeline; see finish.h.
#include "finish.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <unordered_map>
#include <vector>

#include "atomic_file.h"
#include "errline.h"
#include "gzip.h"
#include "heap.h"
#include "heap_dump.h"
#include "identity.h"
#include "image.h"
#include "pprof.h"
#include "procmaps.h"
#include "sampler.h"
#include "summary.h"
#include "stackwalk.h"
#include "symbolize.h"
#include "sys.h"
#include "unnamed.h"
#include "wrappers.h"

namespace finish {
namespace {

struct Range { uint64_t lo, hi; };

// The process's CPU clock when the shim loaded, and the pid it was read in.
// An exec does not reset the clock (the image before it used what it used),
// a fork does (a child's starts from zero): an image's CPU is counted from
// here. The loader's work before our constructor (mapping and relocating
// the libraries, typically a few ms) is left out with it.
uint64_t g_load_cpu_ns;
int g_load_pid;

// First of the shim's constructors (a priority runs before the plain ones,
// lifecycle's setup among them): the setup's CPU is the image's, and not
// in the profile.
__attribute__((constructor(101))) void note_load_cpu() {
  const char* dir = getenv("PROFILE_DIR");
  if (!dir || !*dir) return;  // inert
  g_load_cpu_ns = sys::now_ns(CLOCK_PROCESS_CPUTIME_ID);
  g_load_pid = int(getpid());
}

uint64_t image_cpu_ns() {
  uint64_t now = sys::now_ns(CLOCK_PROCESS_CPUTIME_ID);
  uint64_t base = int(getpid()) == g_load_pid ? g_load_cpu_ns : 0;
  return now > base ? now - base : 0;
}

// Where the shim's own code is: the allocator's frames at the top of heap
// stacks and the wrapper frames around main and thread starts are ours and
// must not show in the program's profiles.
struct Self {
  std::vector<Range> text;
  Range wrap, alloc;
  bool in_text(uint64_t pc) const {
    for (const auto& r : text)
      if (pc >= r.lo && pc < r.hi) return true;
    return false;
  }
  bool in_wrap(uint64_t pc) const { return pc >= wrap.lo && pc < wrap.hi; }
  bool in_alloc(uint64_t pc) const { return pc >= alloc.lo && pc < alloc.hi; }
  // The shim's own code, not the allocator it serves the program with: its
  // wrappers, its signal handlers, its dlclose hook. Work done there on a
  // program's thread is the program's call's cost, shown at the caller.
  bool shim_own(uint64_t pc) const { return in_wrap(pc) || (in_text(pc) && !in_alloc(pc)); }
};

struct RawSample {
  std::vector<uint64_t> addrs;  // adjusted to lie inside the instruction; leaf first
  std::vector<int64_t> values;
  int32_t tid = 0;
  uint32_t serial = 0;  // the thread's, for its name
};

// The shim's own mappings: every mapping of the file that holds this
// function's code (matched by device, inode and path, not by the name
// LD_PRELOAD used, which may go through a symlink or "..").
Self self_ranges(const std::string& maps) {
  Self s;
  s.wrap = {wrappers::begin(), wrappers::end()};
  s.alloc = {wrappers::alloc_begin(), wrappers::alloc_end()};
  uint64_t me = reinterpret_cast<uint64_t>(&run);
  std::vector<procmaps::Line> lines = procmaps::parse(maps);
  for (const auto& mine : lines) {
    if (me < mine.start || me >= mine.end) continue;
    for (const auto& l : lines)
      if (l.same_file(mine)) s.text.push_back({l.start, l.end});
  }
  return s;
}

void add_cpu(const sampler::Stack& st, void* arg) {
  auto* a = static_cast<std::pair<const Self*, std::vector<RawSample>*>*>(arg);
  RawSample r;
  for (uint32_t i = 0; i < st.depth; ++i) {
    uint64_t addr = stackwalk::lookup_addr(st.pcs[i]);
    if (!a->first->shim_own(addr)) r.addrs.push_back(addr);
  }
  if (r.addrs.empty()) return;  // all the shim's (its own threads are not sampled)
  r.values = {int64_t(st.count), int64_t(st.nanos)};
  r.tid = st.tid;
  r.serial = st.serial;
  a->second->push_back(std::move(r));
}

void collect_heap(const heap_dump::Dump& d, const Self& self, std::vector<RawSample>* out) {
  for (const auto& rec : d.records) {
    RawSample r;
    size_t i = 0;
    while (i < rec.pcs.size() && self.in_alloc(rec.pcs[i] - 1)) ++i;  // the allocator
    // Called from the shim's own code (its libstdc++'s static initialisers,
    // say): the shim's allocation, not the program's.
    if (i < rec.pcs.size() && self.in_text(rec.pcs[i] - 1) && !self.in_wrap(rec.pcs[i] - 1)) continue;
    for (; i < rec.pcs.size(); ++i)
      if (!self.in_wrap(rec.pcs[i] - 1)) r.addrs.push_back(rec.pcs[i] - 1);
    r.values = {int64_t(rec.alloc_objects + 0.5), int64_t(rec.alloc_space + 0.5),
                int64_t(rec.inuse_objects + 0.5), int64_t(rec.inuse_space + 0.5)};
    out->push_back(std::move(r));
  }
}

struct Symbols {
  std::unordered_map<uint64_t, size_t> index;
  std::vector<uint64_t> addrs;
  std::vector<symbolize::Result> results;
  std::vector<pprof::Mapping> mappings;
  std::vector<bool> loaded_for_shim;  // per mapping
  size_t cut = 0;                     // addresses left unnamed at the time budget
};

// Names may take until a quarter of PROFILE_STOP_TIMEOUT (at least 0.3 s,
// or half of a shorter one) is left for encoding and writing.
uint64_t names_deadline(const Context& ctx) {
  uint64_t budget = ctx.cfg->stop_timeout_ms * 1000000ull;
  uint64_t reserve = std::max(budget / 4, std::min<uint64_t>(300000000ull, budget / 2));
  uint64_t end = __atomic_load_n(&ctx.deadline_mono_ns, __ATOMIC_ACQUIRE);
  return end > reserve ? end - reserve : 1;
}

void gather(const std::vector<RawSample>& samples, Symbols* sym) {
  for (const auto& s : samples)
    for (uint64_t a : s.addrs)
      if (sym->index.emplace(a, sym->addrs.size()).second) sym->addrs.push_back(a);
}

// The mappings of one profile: a library that is there only for the shim is
// left out unless one of this profile's locations lies in it, and the has_*
// flags say what every location of this profile in the mapping has. Returns
// each mapping's id (0: left out).
std::vector<uint64_t> add_mappings(pprof::Builder& b, const std::vector<RawSample>& samples,
                                   const Symbols& sym) {
  std::vector<symbolize::Coverage> cov(sym.mappings.size());
  std::vector<bool> seen(sym.addrs.size(), false);
  for (const auto& s : samples)
    for (uint64_t a : s.addrs) {
      const size_t i = sym.index.at(a);
      const auto& r = sym.results[i];
      if (!seen[i] && r.mapping >= 0) cov[r.mapping].add(r);
      seen[i] = true;
    }
  std::vector<uint64_t> id(sym.mappings.size(), 0);
  for (size_t i = 0; i < sym.mappings.size(); ++i) {
    if (cov[i].locations == 0 && i < sym.loaded_for_shim.size() && sym.loaded_for_shim[i]) continue;
    pprof::Mapping m = sym.mappings[i];
    cov[i].apply(&m);
    id[i] = b.add_mapping(m);
  }
  return id;
}

// Every sample carries its image's pid and program, so the profiles of a
// process tree merged by pprof still say whose each sample is (-tags,
// -tagfocus=program=cc1plus).
std::vector<pprof::Label> image_labels(const identity::Identity& id) {
  pprof::Label pid, prog;
  pid.key = "pid", pid.num = id.pid, pid.is_num = true;
  prog.key = "program", prog.str = id.program;
  return {pid, prog};
}

void fill(pprof::Builder& b, const std::vector<RawSample>& samples, const Symbols& sym, bool labels,
          const identity::Identity& who) {
  const std::vector<pprof::Label> common = image_labels(who);
  const std::vector<uint64_t> mapping_id = add_mappings(b, samples, sym);
  std::unordered_map<uint64_t, uint64_t> loc;
  std::unordered_map<uint32_t, std::string> names;
  for (const auto& s : samples) {
    std::vector<uint64_t> ids;
    for (uint64_t a : s.addrs) {
      auto it = loc.find(a);
      if (it == loc.end()) {
        const auto& r = sym.results[sym.index.at(a)];
        uint64_t id = b.add_location(a, r.mapping >= 0 ? mapping_id[r.mapping] : 0, r.frames);
        it = loc.emplace(a, id).first;
      }
      ids.push_back(it->second);
    }
    std::vector<pprof::Label> ls = common;
    if (labels) {
      auto n = names.find(s.serial);
      if (n == names.end()) n = names.emplace(s.serial, sampler::thread_name(s.serial)).first;
      pprof::Label id;
      id.key = "thread_id", id.num = s.tid, id.is_num = true;
      ls.push_back(id);
      if (!n->second.empty()) {
        pprof::Label nm;
        nm.key = "thread_name", nm.str = n->second;
        ls.push_back(nm);
      }
    }
    b.add_sample(ids, s.values, ls);
  }
}

std::string unnamed_hint(const std::vector<RawSample>& cpu, const Symbols& sym) {
  std::vector<unnamed::Leaf> leaves;
  for (const auto& s : cpu) {
    if (s.addrs.empty()) continue;
    const symbolize::Result& r = sym.results[sym.index.at(s.addrs[0])];
    leaves.push_back({r.mapping, !r.frames.empty() && !r.frames[0].name.empty(), uint64_t(s.values[1])});
  }
  std::vector<std::string> paths;
  for (const auto& m : sym.mappings) paths.push_back(m.file);
  return unnamed::hint(leaves, paths);
}

// Teardown errors are collected and reported in the one line at the end:
// the stop says once what it could not do, whatever the number of files.
bool emit(pprof::Builder& b, Context& ctx, const char* kind, summary::Figures* f,
          std::vector<std::string>* errors) {
  std::string bad = b.check_valid();
  std::string name = ctx.stem + "." + kind + ".pprof";
  if (!bad.empty()) {
    errors->push_back(std::string(kind) + " profile is invalid, not written: " + bad);
    return false;
  }
  std::string gz, err;
  if (!gzip::compress(b.encode(), &gz, &err, image::marker())) {
    errors->push_back("compressing " + name + ": " + err);
    return false;
  }
  err = atomic_file::write(ctx.cfg->dir, name, gz);
  if (!err.empty()) {
    errors->push_back(err);
    return false;
  }
  f->files.push_back(ctx.cfg->dir + "/" + name);
  return true;
}

void add_comments(pprof::Builder& b, const Context& ctx, const identity::Identity& who, const Symbols& sym) {
  b.add_comment(std::string("profshim: stopped by ") + ctx.how);
  if (sym.cut)
    b.add_comment("profshim: names stopped at the time budget (PROFILE_STOP_TIMEOUT): " + std::to_string(sym.cut) +
                  " of " + std::to_string(sym.addrs.size()) + " addresses have none");
  for (const auto& c : identity::comments(who)) b.add_comment(c);
}

void cpu_profile(Context& ctx, const std::vector<RawSample>& s, const Symbols& sym, const identity::Identity& who,
                 summary::Figures* f, std::vector<std::string>* errors) {
  int64_t period = int64_t(sampler::period_ns());
  pprof::Builder b({{"samples", "count"}, {"cpu", "nanoseconds"}}, {"cpu", "nanoseconds"}, period);
  b.set_default_sample_type("cpu");
  b.set_time(int64_t(ctx.start_real_ns), int64_t(ctx.stop_mono_ns - ctx.start_mono_ns));
  add_comments(b, ctx, who, sym);
  fill(b, s, sym, true, who);
  emit(b, ctx, "cpu", f, errors);
}

// A heap profile is a picture of one moment, the dump: its time is when the
// dump was taken and it has no duration, as Go's heap profiles (runtime/pprof
// sets time_nanos when it writes one, and duration_nanos only for CPU).
void heap_profile(Context& ctx, const std::vector<RawSample>& s, const Symbols& sym, const identity::Identity& who,
                  uint64_t period, uint64_t dump_real_ns, summary::Figures* f, std::vector<std::string>* errors) {
  pprof::Builder b({{"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"},
                    {"inuse_space", "bytes"}},
                   {"space", "bytes"}, int64_t(period));
  b.set_default_sample_type("inuse_space");
  b.set_time(int64_t(dump_real_ns), 0);
  add_comments(b, ctx, who, sym);
  fill(b, s, sym, false, who);
  emit(b, ctx, "heap", f, errors);
}

// Appends what was written so far, as the writer recorded it (signal-safe:
// no allocation).
size_t append_written(const Context& ctx, char* buf, size_t len, size_t cap) {
  auto put = [&](const char* t) {
    for (; *t && len + 1 < cap; ++t) buf[len++] = *t;
  };
  int n = atomic_file::renamed_count();
  if (n == 0) put("; wrote no profile");
  for (int i = 0; i < n; ++i) {
    put(i == 0 ? "; wrote " : " ");
    put(atomic_file::renamed_path(i));
  }
  buf[len] = 0;
  return len;
}

}  // namespace

void report_failure(Context& ctx, const char* why) {
  if (ctx.reported.exchange(true)) return;
  char buf[3072] = "error: the stop ended early: ";
  size_t len = strlen(buf);
  for (const char* t = why; *t && len + 1 < sizeof buf; ++t) buf[len++] = *t;
  append_written(ctx, buf, len, sizeof buf);
  errline::line(buf);
}

void report_timeout(Context& ctx) {
  if (ctx.reported.exchange(true)) return;
  char buf[3072] = "error: the stop did not finish within ";
  size_t len = strlen(buf);
  for (const char* t = ctx.timeout_text; *t && len + 1 < sizeof buf; ++t) buf[len++] = *t;
  const char* mid = " s (PROFILE_STOP_TIMEOUT): gave up, the process ends as it would have";
  for (const char* t = mid; *t && len + 1 < sizeof buf; ++t) buf[len++] = *t;
  append_written(ctx, buf, len, sizeof buf);
  errline::line(buf);
}

void run(Context& ctx) {
  const config::Config& cfg = *ctx.cfg;
  summary::Figures f;
  f.hz = cfg.cpu_hz;
  // The CPU profiler stops first so the stop's own work is not in it; heap
  // sampling stops before the shim allocates anything for the stop.
  if (cfg.cpu_hz) sampler::stop();
  f.cpu_to_stop_s = double(image_cpu_ns()) / 1e9;  // the moment the CPU profile ends
  heap::set_active(false);
  std::vector<std::string> errors;
  std::string heap_text, err;
  const uint64_t dump_real_ns = sys::now_ns(CLOCK_REALTIME);
  bool have_heap = cfg.heap_sample && heap::dump(&heap_text, &err);
  if (cfg.heap_sample && !have_heap) errors.push_back("heap profile not taken: " + err);
  f.heap_seen = heap::serves_malloc();
  std::string maps = sys::read_file("/proc/thread-self/maps");
  Self self = self_ranges(maps);

  std::vector<RawSample> cpu, mem;
  if (cfg.cpu_hz) {
    std::pair<const Self*, std::vector<RawSample>*> arg(&self, &cpu);
    sampler::for_each(add_cpu, &arg);
  }
  heap_dump::Dump dump;
  if (have_heap && !heap_dump::parse(heap_text, &dump, &err)) {
    errors.push_back("heap profile unreadable: " + err);
    have_heap = false;
  }
  if (have_heap) collect_heap(dump, self, &mem);
  for (const auto& m : mem) f.heap_inuse_bytes += uint64_t(m.values[3]);

  Symbols sym;
  gather(cpu, &sym);
  gather(mem, &sym);
  uint64_t t_sym = sys::now_ns(CLOCK_MONOTONIC);
  // The session outlives the profiles' writing: what it looked up is kept
  // for the images after it once they are written.
  symbolize::Session session(maps, true, cfg.dir);
  sym.cut = session.lookup(sym.addrs, &sym.results, names_deadline(ctx));
  sym.mappings = session.mappings();
  sym.loaded_for_shim = session.loaded_for_shim();
  f.symbolize_ms = double(sys::now_ns(CLOCK_MONOTONIC) - t_sym) / 1e6;
  f.names_cut = sym.cut;
  f.unnamed = unnamed_hint(cpu, sym);

  // Pid reuse, a daemon taking NAME, another program's NAME.* (image.h).
  ctx.stem = image::final_stem(cfg.dir, ctx.stem);
  const identity::Identity who = identity::read(image::pid(), ctx.start_real_ns);
  f.who = identity::brief(who);
  if (cfg.cpu_hz) cpu_profile(ctx, cpu, sym, who, &f, &errors);
  if (have_heap) heap_profile(ctx, mem, sym, who, dump.period, dump_real_ns, &f, &errors);
  // What this image looked up, for the images after it: once its own
  // profiles are written (and not when none could be).
  if (!f.files.empty()) session.keep();
  f.symbols_cached = session.cache_stats().cached;
  f.symbols_looked_up = session.cache_stats().looked_up;
  if (!session.error().empty()) errors.push_back("symbols: " + session.error());

  sampler::Stats st = sampler::stats();
  f.samples = st.expirations;
  f.signals = st.signals;
  f.credited = st.credited;
  f.dropped = st.dropped;
  f.dropped_s = double(st.dropped_nanos) / 1e9;
  f.unsampled_threads = st.timer_failures;
  for (const auto& s : cpu) f.profiled_cpu_s += double(s.values[1]) / 1e9;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  f.peak_rss_bytes = uint64_t(ru.ru_maxrss) * 1024;
  f.wall_s = double(ctx.stop_mono_ns - ctx.start_mono_ns) / 1e9;
  f.stop_ms = double(sys::now_ns(CLOCK_MONOTONIC) - ctx.stop_mono_ns) / 1e6;
  if (ctx.reported.exchange(true)) return;  // someone gave up on us: their line stands
  std::string line = summary::format(f);
  if (!errors.empty()) {
    std::string all = "error:";
    for (size_t i = 0; i < errors.size(); ++i) all += (i ? "; " : " ") + errors[i];
    line = all + "; " + line;
  }
  errline::line(line.c_str());
}

}  // namespace finish
