// symbolize: the Session. Describes the executable mappings of the captured
// /proc/self/maps text (symbolize_image.cc reads their build IDs from
// memory), answers each address from the symbol cache of the session's
// images (symbolize_cache.h) or else from libdw -- loaded, and the modules
// reported to libdwfl, only when an address needs it (symbolize_files.cc
// finds their files, symbolize_dwarf.cc the frames inside one module) --
// and keeps each address's frames.
#include "symbolize.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "fsroot.h"
#include "go_unwind.h"
#include "procmaps.h"
#include "symbolize_ghc.h"
#include "symbolize_internal.h"
#include "symbolize_perfmap.h"
#include "sys.h"
#include "unload.h"

namespace symbolize {

using internal::dw;
using internal::ModInfo;
using internal::build_id_from_memory;
using internal::hex;

namespace {

struct ExecRange {
  uint64_t start, end;
  int mapping;
};

ModInfo* new_module(std::vector<std::unique_ptr<ModInfo>>* mods, const procmaps::Line& l) {
  mods->emplace_back(new ModInfo);
  ModInfo* m = mods->back().get();
  m->path = l.path;
  m->vdso = l.path == "[vdso]";
  m->low = m->map_start = l.start;
  m->high = m->map_end = l.end;
  return m;
}

}  // namespace

// --- the session ----------------------------------------------------------------

struct Session::Impl {
  explicit Impl(const std::string& profile_dir) : store(profile_dir) {}
  std::vector<procmaps::Line> lines;
  std::vector<int> module_of_line;  // index into mods, or -1
  std::vector<std::unique_ptr<ModInfo>> mods;
  std::vector<const procmaps::Line*> heads;  // per module, its line at file offset 0 (or null)
  std::string exe_path;
  std::vector<pprof::Mapping> mappings;
  std::vector<int> module_of_mapping;  // index into mods, or -1
  std::vector<Coverage> coverage;      // per mapping, of the addresses looked up
  std::vector<ExecRange> exec;  // sorted by start
  Dwfl_Callbacks callbacks{};
  Dwfl* dwfl = nullptr;  // holds one module at a time: dwfl_mod
  int dwfl_mod = -1;
  void (*released)() = nullptr;  // after_each_module
  internal::Names names;
  std::unordered_map<uint64_t, Result> cache;
  cache::Store store;     // the symbol cache of the session's images
  bool dwfl_tried = false;
  std::string error;      // libdw could not be loaded
  // Code unloaded before the stop (unload.h): the records of this image,
  // oldest first; for each, where its mappings went in `mappings` (-1: it
  // overlaps one already there); the recorded addresses, first record wins.
  struct Gone {
    size_t rec;
    size_t index;  // into the record's addrs / results
  };
  std::vector<const unload::Record*> records;
  std::vector<std::vector<int>> remap;
  std::unordered_map<uint64_t, Gone> gone;
  std::vector<ExecRange> gone_exec;  // the gone mappings that were added, sorted
  PerfMap jit;  // names of generated code, if the process wrote a perf map
  void name_generated(uint64_t pc, Result* r);
  std::vector<signed char> ghc;  // per module: whether GHC made it, -1 until asked

  void find_modules();
  void build_mappings();
  void add_unloaded();
  int place(const pprof::Mapping& m);
  void open_dwfl(int m);
  void release();
  bool cacheable(int m) const;
  int mapping_of(uint64_t pc) const;
  bool mapped_by_same_file(int live, const pprof::Mapping& was) const;
  Result resolve(uint64_t pc);
  // The addresses the running lookup asks, sorted (module_frames says why).
  const std::vector<uint64_t>* batch = nullptr;
  const std::vector<uint64_t> no_batch;
};

// Consecutive lines of one file (same device, inode and path) form one module,
// as in elfutils' own maps reader; anonymous lines between them (a .bss) do
// not split it. Only modules with executable code are kept, and only their
// memory is read (for the build ID): a data file mapped and then truncated
// would fault on the first read.
void Session::Impl::find_modules() {
  module_of_line.assign(lines.size(), -1);
  const procmaps::Line* prev = nullptr;
  std::vector<bool> has_exec;
  std::vector<const procmaps::Line*> head;  // each module's line at file offset 0
  for (size_t i = 0; i < lines.size(); ++i) {
    const procmaps::Line& l = lines[i];
    if (!l.is_file() && l.path != "[vdso]") continue;
    if (prev && prev->same_file(l)) {
      mods.back()->high = l.end;
    } else {
      new_module(&mods, l);
      has_exec.push_back(false);
      head.push_back(nullptr);
    }
    module_of_line[i] = static_cast<int>(mods.size()) - 1;
    if (l.executable()) has_exec.back() = true;
    if (l.offset == 0 && !head.back()) head.back() = &l;
    prev = &l;
  }
  std::vector<int> renumber(mods.size(), -1);
  size_t kept = 0;
  for (size_t m = 0; m < mods.size(); ++m) {
    if (!has_exec[m]) continue;
    if (head[m]) mods[m]->build_id = build_id_from_memory(lines, *head[m]);
    renumber[m] = static_cast<int>(kept);
    heads.push_back(head[m]);
    mods[kept++] = std::move(mods[m]);
  }
  mods.resize(kept);
  for (int& m : module_of_line)
    if (m >= 0) m = renumber[m];
}

// One mapping per executable line, the main executable's first.
void Session::Impl::build_mappings() {
  char exe[PATH_MAX];
  ssize_t n = fsroot::readlink(sys::proc_thread_self("exe").c_str(), exe, sizeof exe - 1);
  exe_path = n > 0 ? std::string(exe, n) : std::string();
  std::vector<size_t> order;
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].executable()) order.push_back(i);
  std::stable_partition(order.begin(), order.end(),
                        [&](size_t i) { return !exe_path.empty() && lines[i].path == exe_path; });
  for (size_t i : order) {
    const procmaps::Line& l = lines[i];
    pprof::Mapping m;
    m.start = l.start;
    m.limit = l.end;
    m.offset = l.offset;
    m.file = l.path;
    if (module_of_line[i] >= 0) m.build_id = hex(mods[module_of_line[i]]->build_id);
    exec.push_back({l.start, l.end, static_cast<int>(mappings.size())});
    mappings.push_back(std::move(m));
    module_of_mapping.push_back(module_of_line[i]);
  }
  coverage.resize(mappings.size());
  std::sort(exec.begin(), exec.end(), [](const ExecRange& a, const ExecRange& b) { return a.start < b.start; });
}

// A gone library's mapping: appended if it overlaps none already there; the
// same mapping again (a library loaded and unloaded twice at one place) is
// the one already there; one that overlaps another is left out (-1).
int Session::Impl::place(const pprof::Mapping& m) {
  bool overlaps = false;
  for (size_t i = 0; i < mappings.size(); ++i) {
    const pprof::Mapping& x = mappings[i];
    if (x.start == m.start && x.limit == m.limit && x.offset == m.offset && x.file == m.file &&
        x.build_id == m.build_id)
      return static_cast<int>(i);
    if (m.start < x.limit && x.start < m.limit) overlaps = true;
  }
  if (overlaps) return -1;
  pprof::Mapping copy = m;
  copy.has_functions = copy.has_filenames = copy.has_line_numbers = copy.has_inline_frames = false;
  mappings.push_back(std::move(copy));
  module_of_mapping.push_back(-1);
  coverage.emplace_back();
  const int id = static_cast<int>(mappings.size()) - 1;
  gone_exec.push_back({m.start, m.limit, id});
  return id;
}

void Session::Impl::add_unloaded() {
  const int pid = static_cast<int>(getpid());
  for (const unload::Record* r = unload::records(); r; r = r->next)
    if (r->pid == pid) records.push_back(r);  // a fork child's parent's are not its own
  std::reverse(records.begin(), records.end());
  remap.resize(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    for (const auto& m : records[i]->mappings) remap[i].push_back(place(m));
    for (size_t j = 0; j < records[i]->addrs.size() && j < records[i]->results.size(); ++j)
      gone.emplace(records[i]->addrs[j], Gone{i, j});
  }
  std::sort(gone_exec.begin(), gone_exec.end(),
            [](const ExecRange& a, const ExecRange& b) { return a.start < b.start; });
}

// Without libdw the session still describes mappings; lookups then give
// each address its mapping and no frames. libdwfl is given one module at a
// time (lookup() asks in address order, so each module's addresses come
// together): the files it maps and the DWARF it reads are released before
// the next module's, and the stop's peak RSS is its largest module's, not
// the sum of all (libc's debug file and a Go binary's DWARF: 8 MiB each).
void Session::Impl::open_dwfl(int m) {
  if (dwfl && dwfl_mod == m) return;
  release();
  if (!dwfl_tried) {
    dwfl_tried = true;
    std::string err;
    if (!load_libdw(&err)) error = err;  // said once, in the line
    internal::fill_callbacks(&callbacks);
  }
  if (!error.empty()) return;
  dwfl = dw().dwfl_begin(&callbacks);
  if (!dwfl) return;
  dwfl_mod = m;
  dw().dwfl_report_begin(dwfl);
  ModInfo* mi = mods[m].get();
  Dwfl_Module* mod = dw().dwfl_report_module(dwfl, mi->path.c_str(), mi->low, mi->high);
  void** userdata = nullptr;
  if (mod) dw().dwfl_module_info(mod, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  if (userdata) *userdata = mi;
  dw().dwfl_report_end(dwfl, nullptr, nullptr);
}

// The open module's files and DWARF go; what outlives them is kept: its
// symbols (their names copied out of the file's string table when they
// were read, load_symbols) and whether DWARF was found.
void Session::Impl::release() {
  if (!dwfl) return;
  ModInfo* mi = mods[dwfl_mod].get();
  if (mi->dwarf.tried) {
    mi->dwarf_looked = true;
    mi->dwarf_found = mi->dwarf_found || mi->dwarf.dw != nullptr;
  }
  mi->dwarf = internal::DwarfState();
  dw().dwfl_end(dwfl);
  dwfl = nullptr;
  dwfl_mod = -1;
  if (released) released();
}

int Session::Impl::mapping_of(uint64_t pc) const {
  auto it = std::upper_bound(exec.begin(), exec.end(), pc,
                             [](uint64_t v, const ExecRange& r) { return v < r.start; });
  if (it == exec.begin()) return -1;
  --it;
  return pc < it->end ? it->mapping : -1;
}

// Whether the live mapping `live` is of the file that `was` (a gone
// library's mapping) was: then the library is back, and the live lookup
// names its code.
bool Session::Impl::mapped_by_same_file(int live, const pprof::Mapping& was) const {
  return live >= 0 && mappings[live].file == was.file && mappings[live].build_id == was.build_id;
}

// Code of no file, named if the process's perf map names it.
void Session::Impl::name_generated(uint64_t pc, Result* r) {
  if (const std::string* name = jit.find(pc)) r->frames.push_back(pprof::Frame{*name, *name, "", 0, 0});
}

Result Session::Impl::resolve(uint64_t pc) {
  Result r;
  r.mapping = mapping_of(pc);
  auto g = gone.find(pc);
  if (g != gone.end()) {
    const unload::Record& rec = *records[g->second.rec];
    const Result& then = rec.results[g->second.index];
    const bool back = then.mapping >= 0 && static_cast<size_t>(then.mapping) < rec.mappings.size() &&
                      mapped_by_same_file(r.mapping, rec.mappings[then.mapping]);
    if (!back) {
      r = then;
      r.mapping = then.mapping >= 0 && static_cast<size_t>(then.mapping) < remap[g->second.rec].size()
                      ? remap[g->second.rec][then.mapping]
                      : -1;
      return r;
    }
  }
  if (r.mapping < 0) {  // in a gone library's mapping, perhaps: no frames, never a guess
    auto it = std::upper_bound(gone_exec.begin(), gone_exec.end(), pc,
                               [](uint64_t v, const ExecRange& e) { return v < e.start; });
    if (it != gone_exec.begin() && pc < (--it)->end) r.mapping = it->mapping;
    if (r.mapping < 0) name_generated(pc, &r);
    return r;
  }
  const int m = module_of_mapping[r.mapping];
  if (m < 0) {  // anonymous executable memory: generated code
    name_generated(pc, &r);
    return r;
  }
  // Go code without DWARF (a stripped binary, whose .dynsym names would
  // be a neighbour's): the name Go's own tables give, as Go prints it.
  if (const char* go = go_unwind::name_of(pc)) {
      r.frames.emplace_back();
      r.frames.back().name = r.frames.back().system_name = go;
      r.go_tables = true;
      return r;
    }
  const bool keep = cacheable(m);
  const uint64_t rel = keep ? pc - mods[m]->low : 0;
  if (keep)
    if (const Result* hit = store.find(m, mods[m]->build_id, rel)) {
      r.frames = hit->frames;
      r.inlines_known = hit->inlines_known;
      return r;
    }
  if (keep && internal::name_from_table(&store, mods[m].get(), pc, &names, &r)) {  // without libdw
    ghc::name_frames(*mods[m], lines, heads[m], &ghc[m], &r.frames);
    store.add(m, rel, r);
    return r;
  }
  open_dwfl(m);
  if (!dwfl) return r;
  Dwfl_Module* mod = dw().dwfl_addrmodule(dwfl, pc);
  void** userdata = nullptr;
  if (mod) dw().dwfl_module_info(mod, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  ModInfo* mi = userdata ? static_cast<ModInfo*>(*userdata) : nullptr;
  if (mi && mi->shim_itself) mi->dwarf.tried = true;  // no DWARF read: its symbols name it
  if (mi) r.inlines_known = internal::module_frames(mod, mi, pc, batch ? *batch : no_batch, &names, &r.frames);
  if (mi == mods[m].get()) ghc::name_frames(*mi, lines, heads[m], &ghc[m], &r.frames);
  store.note_lookup();
  if (keep && mi == mods[m].get()) store.add(m, rel, r);
  return r;
}

// Whether module m's frames can be kept: it has a build ID to file them
// under and check them by, its file was not deleted since it was mapped, and
// its first mapping is at the file's start (addresses relative to it are
// then the same in the next image).
bool Session::Impl::cacheable(int m) const {
  if (m < 0) return false;
  const ModInfo& mi = *mods[m];
  static const char kDeleted[] = " (deleted)";
  const size_t nd = sizeof kDeleted - 1;
  if (mi.build_id.empty() || (mi.path.size() > nd && mi.path.compare(mi.path.size() - nd, nd, kDeleted) == 0))
    return false;
  return mi.vdso || (heads[m] && heads[m]->start == mi.low);
}

Session::Session(const std::string& maps_text, bool with_unloaded, const std::string& profile_dir)
    : Session(procmaps::parse(maps_text), with_unloaded, profile_dir) {}

Session::Session(std::vector<procmaps::Line> lines, bool with_unloaded, const std::string& profile_dir)
    : impl_(new Impl(profile_dir)) {
  impl_->lines = std::move(lines);
  impl_->find_modules();
  impl_->ghc.assign(impl_->mods.size(), -1);
  for (auto& m : impl_->mods) m->profile_dir = profile_dir;
  impl_->build_mappings();
  // The shim's own frames (the allocator's wrappers at the top of a heap
  // stack, the thread trampoline at the bottom) are named by its symbol
  // table: its DWARF (-g, 9 MiB of .debug_info) cost the stop 4 MiB of peak
  // RSS for a few names, and its lines are of no use to the program's owner.
  const uint64_t self = reinterpret_cast<uint64_t>(&load_libdw);
  for (auto& m : impl_->mods)
    m->shim_itself = self >= m->low && self < m->high && m->path != impl_->exe_path;
  if (with_unloaded) impl_->add_unloaded();
}

Session::~Session() {
  impl_->release();  // before the [vdso] copy it reads goes
  delete impl_;
}

size_t Session::lookup(const std::vector<uint64_t>& addrs, std::vector<Result>* out, uint64_t deadline_mono_ns) {
  out->clear();
  out->reserve(addrs.size());
  size_t skipped = 0;
  // In address order, so that each module's addresses come together
  // (open_dwfl says why).
  std::vector<uint64_t> todo;
  for (uint64_t a : addrs)
    if (!impl_->cache.count(a)) todo.push_back(a);
  std::sort(todo.begin(), todo.end());
  todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
  impl_->batch = &todo;
  for (uint64_t a : todo) {
    auto it = impl_->cache.find(a);
    {
      // Past the budget, an address keeps its mapping and gets no frames:
      // the numbers never wait on names (a module's DWARF can take seconds
      // to load; the check is between addresses, so one load may overrun).
      Result r;
      if (deadline_mono_ns && sys::now_ns(CLOCK_MONOTONIC) >= deadline_mono_ns) {
        r.mapping = impl_->mapping_of(a);
        ++skipped;
      } else {
        r = impl_->resolve(a);
      }
      it = impl_->cache.emplace(a, std::move(r)).first;
      if (it->second.mapping >= 0) {
        impl_->coverage[it->second.mapping].add(it->second);
        impl_->coverage[it->second.mapping].apply(&impl_->mappings[it->second.mapping]);
      }
    }
  }
  impl_->release();
  impl_->batch = nullptr;
  for (uint64_t a : addrs) out->push_back(impl_->cache.find(a)->second);
  return skipped;
}

void Session::keep() { impl_->store.flush(impl_->mods); }

void Session::after_each_module(void (*fn)()) { impl_->released = fn; }

const CacheStats& Session::cache_stats() const { return impl_->store.stats(); }

std::string Session::error() const { return impl_->error.empty() ? impl_->store.error() : impl_->error; }

const std::vector<pprof::Mapping>& Session::mappings() const { return impl_->mappings; }

std::vector<bool> Session::loaded_for_shim() const {
  const std::vector<bool> own = internal::loaded_for_shim(
      impl_->lines, impl_->heads, impl_->mods, reinterpret_cast<uint64_t>(&load_libdw), impl_->exe_path);
  std::vector<bool> out(impl_->mappings.size(), false);
  for (size_t i = 0; i < out.size(); ++i)
    if (impl_->module_of_mapping[i] >= 0) out[i] = own[impl_->module_of_mapping[i]];
  return out;
}

}  // namespace symbolize
