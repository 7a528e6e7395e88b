// finish: the writer of a set of profiles, and the stop; see finish.h.
#include "finish.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <unordered_map>
#include <vector>

#include "atomic_file.h"
#include "forks.h"
#include "gzip.h"
#include "heap.h"
#include "identity.h"
#include "image.h"
#include "pprof.h"
#include "snapshot.h"
#include "sandbox.h"
#include "summary.h"
#include "summary_log.h"
#include "symbolize.h"
#include "sys.h"
#include "unnamed.h"

namespace finish {
namespace {

// The process's CPU clock when the shim loaded, and the pid it was read in.
// An exec does not reset the clock (the image before it used what it used),
// a fork does (a child's starts from zero): an image's CPU is counted from
// here. The loader's work before our constructor (mapping and relocating
// the libraries, typically a few ms) is left out with it.
uint64_t g_load_cpu_ns;
int g_load_pid;

// First of the shim's constructors (a priority runs before the plain ones,
// the setup among them): the setup's CPU is the image's, and not in the
// profile.
__attribute__((constructor(101))) void note_load_cpu() {
  const char* dir = getenv("PROFILE_DIR");
  if (!dir || !*dir) return;  // inert
  // Exec'd under a filter that may kill getpid: inert too (setup.cc).
  if (image::marker_sandboxed(getenv("PROFSHIM_IMAGE"))) return;
  g_load_cpu_ns = sys::now_ns(CLOCK_PROCESS_CPUTIME_ID);
  g_load_pid = int(getpid());
}

uint64_t image_cpu_ns() {
  uint64_t now = sys::now_ns(CLOCK_PROCESS_CPUTIME_ID);
  uint64_t base = int(getpid()) == g_load_pid ? g_load_cpu_ns : 0;
  return now > base ? now - base : 0;
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

void gather(const std::vector<engine::Sample>& samples, Symbols* sym) {
  for (const auto& s : samples)
    for (uint64_t a : s.addrs)
      if (sym->index.emplace(a, sym->addrs.size()).second) sym->addrs.push_back(a);
}

// The mappings of one profile: a library that is there only for the shim is
// left out unless one of this profile's locations lies in it, and the has_*
// flags say what every location of this profile in the mapping has. Returns
// each mapping's id (0: left out).
std::vector<uint64_t> add_mappings(pprof::Builder& b, const std::vector<engine::Sample>& samples,
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
// -tagfocus=program=cc1plus); a fork child's handed-over one, its pid.
std::vector<pprof::Label> image_labels(const identity::Identity& id) {
  pprof::Label pid, prog;
  pid.key = "pid", pid.num = id.pid, pid.is_num = true;
  prog.key = "program", prog.str = id.program;
  return {pid, prog};
}

void fill(pprof::Builder& b, const std::vector<engine::Sample>& samples, const Symbols& sym,
          const identity::Identity& who) {
  const std::vector<pprof::Label> common = image_labels(who);
  const std::vector<uint64_t> mapping_id = add_mappings(b, samples, sym);
  std::unordered_map<uint64_t, uint64_t> loc;
  for (const auto& s : samples) {
    std::vector<uint64_t> ids;
    // Named alone, in no mapping (the builder keeps one location per name).
    if (!s.leaf.empty()) ids.push_back(b.add_location(0, 0, {pprof::Frame{s.leaf, s.leaf, "", 0, 0}}));
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
    if (s.pid) ls[0].num = s.pid;
    ls.insert(ls.end(), s.labels.begin(), s.labels.end());
    b.add_sample(ids, s.values, ls);
  }
}

// The CPU part's leaves: whether most of its CPU has no names (unnamed.h).
std::string unnamed_hint(const engine::Part& cpu, const Symbols& sym) {
  std::vector<unnamed::Leaf> leaves;
  for (const auto& s : cpu.samples) {
    if (s.addrs.empty() || s.values.size() < 2) continue;
    const symbolize::Result& r = sym.results[sym.index.at(s.addrs[0])];
    leaves.push_back({r.mapping, !r.frames.empty() && !r.frames[0].name.empty(), uint64_t(s.values[1])});
  }
  std::vector<std::string> paths;
  for (const auto& m : sym.mappings) paths.push_back(m.file);
  return unnamed::hint(leaves, paths);
}

// Errors are collected and reported together (a stop says once, in its
// line, what it could not do, whatever the number of files).
void emit(const engine::Part& p, const Symbols& sym, const Target& to, const identity::Identity& who,
          std::vector<std::string>* files, std::vector<std::string>* errors) {
  const std::string name = to.stem + to.infix + "." + p.kind + ".pprof";
  pprof::Builder b(p.types, p.period_type, p.period);
  b.set_default_sample_type(p.default_type);
  if (!p.drop_frames.empty()) b.set_drop_frames(p.drop_frames);
  b.set_time(p.time_ns, p.duration_ns);
  b.add_comment("profshim: " + to.why);
  if (sym.cut)
    b.add_comment("profshim: names stopped at the time budget (PROFILE_STOP_TIMEOUT): " + std::to_string(sym.cut) +
                  " of " + std::to_string(sym.addrs.size()) + " addresses have none");
  for (const auto& c : identity::comments(who)) b.add_comment(c);
  for (const auto& c : p.comments) b.add_comment(c);
  fill(b, p.samples, sym, who);
  std::string bad = b.check_valid();
  if (!bad.empty()) {
    errors->push_back(p.kind + " profile is invalid, not written: " + bad);
    return;
  }
  std::string gz, err;
  if (!gzip::compress(b.encode(), &gz, &err, image::marker())) {
    errors->push_back("compressing " + name + ": " + err);
    return;
  }
  err = atomic_file::write(to.dir, name, gz);
  if (!err.empty()) {
    errors->push_back(err);
    return;
  }
  files->push_back(to.dir + "/" + name);
}

}  // namespace

// The snapshot worker's names, kept across its sets (Target::names):
// libdw reads a module's DWARF whole at its first address (inflating
// compressed debug sections: ~100 ms for libc6-dbg's), and every heap
// stack passes through libc, so a heap-peak file that looked its names up
// afresh each time cost that much CPU per file. An address keeps its names
// while the same file stays mapped at the same place. One per image, the
// worker's alone: the stop never uses it (it may run while a halted
// worker's write is still under way), and a fork child makes its own (the
// parent's may have been mid-update at the fork).
struct NameCache {
  struct Named {
    std::string file;
    uint64_t start, offset;
    symbolize::Result result;
  };
  std::unordered_map<uint64_t, Named> by_addr;
};

NameCache* new_name_cache() { return new NameCache(); }

namespace {

void lookup_reusing(symbolize::Session& session, NameCache* cache, Symbols* sym) {
  auto* named = &cache->by_addr;
  std::vector<uint64_t> known, fresh;
  for (uint64_t a : sym->addrs) (named->count(a) ? known : fresh).push_back(a);
  std::vector<symbolize::Result> kr, fr;
  session.lookup(fresh, &fr);
  session.lookup(known, &kr, 1);  // a deadline passed: the mapping alone, no DWARF read
  const std::vector<pprof::Mapping>& maps = session.mappings();
  std::unordered_map<uint64_t, const symbolize::Result*> by_addr;
  for (size_t i = 0; i < fresh.size(); ++i) {
    by_addr[fresh[i]] = &fr[i];
    const symbolize::Result& r = fr[i];
    if (r.mapping >= 0 && !r.frames.empty())
      (*named)[fresh[i]] = NameCache::Named{maps[r.mapping].file, maps[r.mapping].start, maps[r.mapping].offset, r};
  }
  for (size_t i = 0; i < known.size(); ++i) {
    symbolize::Result& r = kr[i];
    auto it = named->find(known[i]);
    const NameCache::Named& n = it->second;
    if (r.mapping >= 0 && maps[r.mapping].file == n.file && maps[r.mapping].start == n.start &&
        maps[r.mapping].offset == n.offset) {
      const int m = r.mapping;
      r = n.result;
      r.mapping = m;
    } else {
      named->erase(it);  // another file there now: named afresh by the next set
    }
    by_addr[known[i]] = &r;
  }
  sym->results.clear();
  for (uint64_t a : sym->addrs) sym->results.push_back(*by_addr[a]);
}

}  // namespace

const engine::Part* Set::part(const char* kind) const {
  for (const auto& p : parts)
    if (p.kind == kind) return &p;
  return nullptr;
}

void collect(engine::Why why, const engine::When& when, Set* set) {
  set->why = why;
  set->maps = procmaps::parse(sys::read_file(sys::proc_thread_self("maps").c_str()));
  set->self = engine::self_ranges(set->maps);
  int n = 0;
  const engine::Engine* const* all = engine::all(&n);
  for (int i = 0; i < n; ++i) {
    if (!all[i]->on()) continue;
    engine::Part p;
    std::string err;
    if (all[i]->collect(why, when, set->self, &p, &err)) {
      forks::merge(*all[i], why, set->self, &p);
      set->parts.push_back(std::move(p));
      set->from.push_back(all[i]);
    } else if (!err.empty()) {
      set->errors.push_back(err);
    }
  }
}

void write(Set& set, const Target& to, Written* out) {
  Symbols sym;
  for (const auto& p : set.parts) gather(p.samples, &sym);
  uint64_t t_sym = sys::now_ns(CLOCK_MONOTONIC);
  // The session outlives the profiles' writing: what it looked up is kept
  // for the images after it once they are written.
  symbolize::Session session(set.maps, true, to.symbol_cache);
  session.after_each_module(heap::trim_private_arena);
  if (to.names)
    lookup_reusing(session, to.names, &sym);
  else
    sym.cut = session.lookup(sym.addrs, &sym.results, to.names_deadline_mono_ns);
  sym.mappings = session.mappings();
  sym.loaded_for_shim = session.loaded_for_shim();
  out->symbolize_ms = double(sys::now_ns(CLOCK_MONOTONIC) - t_sym) / 1e6;
  out->names_cut = sym.cut;
  if (const engine::Part* cpu = set.part("cpu")) out->unnamed = unnamed_hint(*cpu, sym);
  // Read at each set: a program that retitles itself is recorded as it
  // called itself last.
  const identity::Identity who = identity::read(image::pid(), to.start_real_ns);
  out->who = identity::brief(who);
  for (const auto& p : set.parts) emit(p, sym, to, who, &out->files, &set.errors);
  // What this image looked up, for the images after it: once its own
  // profiles are written (and not when none could be).
  if (!to.symbol_cache.empty() && !out->files.empty()) session.keep();
  out->symbols_cached = session.cache_stats().cached;
  out->symbols_looked_up = session.cache_stats().looked_up;
  if (!session.error().empty()) set.errors.push_back("symbols: " + session.error());
}

void run(Context& ctx) {
  const config::Config& cfg = *ctx.cfg;
  sys::DescriptorRoom room(!sandbox::filter_seen());  // the program's limit again before it runs on or execs
  // The snapshot worker's work in progress ends first: one writer at a time.
  const bool worker_let_go = snapshot::halt(ctx.deadline_mono_ns);
  // What a stop that gives up names as written is its own files only (a
  // snapshot's, through the same writer, filled the list before).
  atomic_file::stop_writes();
  summary::Figures f;
  f.hz = cfg.cpu_hz;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  f.peak_rss_before_stop_bytes = uint64_t(ru.ru_maxrss) * 1024;
  // The CPU profiler stops first so the stop's own work is not in it; heap
  // sampling stops before the shim allocates anything for the stop.
  int n = 0;
  const engine::Engine* const* all = engine::all(&n);
  for (int i = 0; i < n; ++i)
    if (all[i]->on()) all[i]->halt();
  uint64_t cpu_ns = image_cpu_ns();  // the moment the CPU profile ends
  f.cpu_to_stop_s = double(cpu_ns) / 1e9;
  // A fork child's end but an exec's (another program) hands its samples
  // to its parent image: no maps, no symbols, no files, no line (forks.h).
  if (strcmp(ctx.how, "exec") != 0 && forks::hand_over(cpu_ns)) return (void)ctx.reported.exchange(true);
  forks::close(ctx.deadline_mono_ns);  // what this image's children handed over is in this set
  Set set;
  engine::When when;
  when.mono_ns = ctx.stop_mono_ns;
  when.real_ns = sys::now_ns(CLOCK_REALTIME);
  collect(engine::Why::kStop, when, &set);
  // Nothing reads the tables after this but a snapshot worker that did not
  // let go, or the same image after a failed exec: its own (an exec's
  // stop), or one that comes after this stop (an atexit handler's, another
  // thread's), which then does not resume the image (lifecycle.cc,
  // exec_failed): the files of this stop stand.
  if (worker_let_go && strcmp(ctx.how, "exec") != 0) {
    ctx.released.store(true);
    engine::each_on(&engine::Engine::release);
  }
  // Pid reuse, a daemon taking NAME, another program's NAME.* (image.h).
  ctx.stem = image::final_stem(cfg.dir, ctx.stem, cpu_ns);
  Target to;
  to.dir = cfg.dir, to.stem = ctx.stem, to.why = std::string("stopped by ") + ctx.how;
  to.start_real_ns = ctx.start_real_ns;
  to.names_deadline_mono_ns = names_deadline(ctx);
  to.symbol_cache = cfg.dir;
  Written w;
  write(set, to, &w);
  if (strcmp(ctx.how, "exec") != 0) image::unpublish();
  f.files = std::move(w.files);
  f.symbolize_ms = w.symbolize_ms;
  f.names_cut = w.names_cut;
  f.unnamed = std::move(w.unnamed);
  f.who = std::move(w.who);
  f.symbols_cached = w.symbols_cached;
  f.symbols_looked_up = w.symbols_looked_up;
  for (int i = 0; i < n; ++i) {
    const engine::Part* mine = nullptr;
    for (size_t j = 0; j < set.parts.size(); ++j)
      if (set.from[j] == all[i]) mine = &set.parts[j];
    all[i]->figures(mine, &f);
  }
  snapshot::at_stop(set.part("heap"), &f);
  forks::figures(&f);
  if (!f.files.empty())
    forks::release();
  else if (std::string kept = forks::nothing_written(); !kept.empty())
    f.more.push_back(kept);
  getrusage(RUSAGE_SELF, &ru);
  f.peak_rss_bytes = uint64_t(ru.ru_maxrss) * 1024;
  f.wall_s = double(ctx.stop_mono_ns - ctx.start_mono_ns) / 1e9;
  f.stop_ms = double(sys::now_ns(CLOCK_MONOTONIC) - ctx.stop_mono_ns) / 1e6;
  f.fatal_deferred = ctx.fatal_deferrals.load();
  if (ctx.reported.exchange(true)) return;  // someone gave up on us: their line stands
  std::string line = summary::format(f);
  if (!set.errors.empty()) {
    std::string all_errors = "error:";
    for (size_t i = 0; i < set.errors.size(); ++i) all_errors += (i ? "; " : " ") + set.errors[i];
    line = all_errors + "; " + line;
  }
  // On stderr: NAME's line (the program the operator ran), those of the
  // programs PROFILE_ONLY names, and any with an error (summary_log.h).
  summary_log::line(line.c_str(), ctx.stem == cfg.name || !cfg.only.empty() || !set.errors.empty());
}

}  // namespace finish
