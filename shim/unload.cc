// unload: the dlclose side of unload.h (the records themselves are
// unload_records.cc's).
#include "unload.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>

#include "engine.h"
#include "glibc_compat.h"
#include "heap.h"
#include "procmaps.h"
#include "recover.h"
#include "sys.h"
#include "stackwalk.h"

namespace unload {
namespace {

// How many objects dl_iterate_phdr reported when the shim's constructors ran:
// the program, its dependencies, the preloads. glibc never unloads these.
int g_initial = 0;
thread_local bool t_busy = false;
using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
CreateFn g_create = nullptr;  // libc's pthread_create
constexpr size_t kHelperStack = size_t(4) << 20;

struct Obj {
  uint64_t lo = ~0ull, hi = 0;  // the span of its PT_LOAD segments, page-aligned
  uint64_t probe = 0;           // an address in its first PT_LOAD, for dladdr1
  std::vector<std::pair<uint64_t, uint64_t>> exec;  // [lo, hi) of PF_X segments
  std::string build_id;         // hex, from its PT_NOTE in memory
};

std::string hex(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

// The NT_GNU_BUILD_ID in a PT_NOTE segment of a loaded object (mapped: the
// loader's list lock is held while we look).
std::string build_id_in(const char* p, uint64_t size, uint64_t align) {
  auto padded = [align](uint64_t n) { return (n + align - 1) & ~(align - 1); };
  while (size >= sizeof(ElfW(Nhdr))) {
    ElfW(Nhdr) nh;
    memcpy(&nh, p, sizeof nh);
    const uint64_t name_len = padded(nh.n_namesz), desc_len = padded(nh.n_descsz);
    if (name_len + desc_len > size - sizeof nh) break;
    const char* name = p + sizeof nh;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(name, "GNU", 4) == 0)
      return hex(reinterpret_cast<const unsigned char*>(name + name_len), nh.n_descsz);
    p += sizeof nh + name_len + desc_len;
    size -= sizeof nh + name_len + desc_len;
  }
  return "";
}

int count_objects(struct dl_phdr_info*, size_t, void* arg) {
  ++*static_cast<int*>(arg);
  return 0;
}

// Only copies (no dl* call here: dl_iterate_phdr holds the loader's list lock).
int collect_objects(struct dl_phdr_info* info, size_t, void* arg) {
  auto* out = static_cast<std::vector<Obj>*>(arg);
  static const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  Obj o;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || ph.p_memsz == 0) continue;
    uint64_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (!o.probe) o.probe = lo;
    o.lo = std::min(o.lo, lo & ~(page - 1));
    o.hi = std::max(o.hi, (hi + page - 1) & ~(page - 1));
    if (ph.p_flags & PF_X) o.exec.emplace_back(lo, hi);
  }
  for (int i = 0; i < info->dlpi_phnum && o.build_id.empty(); ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_NOTE)
      o.build_id = build_id_in(reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr), ph.p_filesz,
                               ph.p_align == 8 ? 8 : 4);
  }
  out->push_back(std::move(o));
  return 0;
}

// Resolved here, once, rather than at a dlclose: dlsym there could change
// what the program's next dlerror() returns.
__attribute__((constructor)) void count_initial_objects() {
  const char* dir = getenv("PROFILE_DIR");
  if (!dir || !*dir) return;  // inert: nothing to remember
  int n = 0;
  dl_iterate_phdr(count_objects, &n);
  g_initial = n;
  g_create = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
}

// Sampled addresses (as finish looks them up) in code loaded after the
// process started and not yet recorded, gathered a dlclose at a time from
// the stacks the engines published since the previous one: a dlclose never
// walks a whole table, whatever the number of dlcloses.
struct Pending {
  int pid = 0;  // a fork child's engines start with tables of their own
  std::vector<uint64_t> cursors;  // each engine's (engine::all()'s order)
  std::unordered_set<uint64_t> addrs;
};
Pending& pending() {
  static Pending* p = new Pending;
  return *p;
}

struct Collect {
  const std::vector<std::pair<uint64_t, uint64_t>>* ranges;  // sorted, disjoint
  std::unordered_set<uint64_t>* out;
};

void collect_new(const stack_table::Stack& st, void* arg) {
  auto* c = static_cast<Collect*>(arg);
  for (uint32_t i = 0; i < st.depth; ++i) {
    uint64_t a = stackwalk::lookup_addr(st.pcs[i]);
    auto it = std::upper_bound(c->ranges->begin(), c->ranges->end(), std::make_pair(a, ~uint64_t(0)));
    if (it != c->ranges->begin() && a < (--it)->second) c->out->insert(a);
  }
}

// The /proc/self/maps lines of one object: its file's lines inside its span.
std::string lines_of(const std::string& maps, const Obj& o) {
  std::string out;
  size_t pos = 0;
  while (pos < maps.size()) {
    size_t eol = maps.find('\n', pos);
    if (eol == std::string::npos) eol = maps.size();
    std::string line = maps.substr(pos, eol - pos);
    pos = eol + 1;
    std::vector<procmaps::Line> l = procmaps::parse(line);
    if (l.size() == 1 && l[0].is_file() && l[0].start >= o.lo && l[0].end <= o.hi) out += line + "\n";
  }
  return out;
}

// Whether this object (same span and build ID) has a record already.
bool known(const Obj& o, int pid) {
  for (const Record* p = records(); p; p = p->next)
    if (p->pid == pid && p->lo == o.lo && p->hi == o.hi && p->build_id == o.build_id) return true;
  return false;
}

// Records obj with the frames of addrs (sorted, unique, none recorded yet).
void record(const std::string& maps, const Obj& o, const std::vector<uint64_t>& addrs, int pid) {
  std::string text = lines_of(maps, o);
  if (text.empty()) return;
  auto* r = new Record;
  r->pid = pid;
  r->lo = o.lo, r->hi = o.hi;
  r->build_id = o.build_id;
  {
    symbolize::Session s(text, /*with_unloaded=*/false);
    if (!addrs.empty()) s.lookup(addrs, &r->results);
    r->mappings = s.mappings();
  }
  if (r->mappings.empty()) {
    delete r;
    return;
  }
  for (auto& m : r->mappings)
    m.has_functions = m.has_filenames = m.has_line_numbers = m.has_inline_frames = false;
  r->addrs = addrs;
  if (!publish(r)) delete r;
}

// What a dlclose leaves to record: objects, each with its new addresses.
struct Job {
  int pid = 0;
  std::vector<Obj> objs;
  std::vector<std::vector<uint64_t>> addrs;
};

// On the program's thread, cheaply (no file is opened): which objects the
// dlclose may unmap, and which of their sampled addresses no record has.
// False when there is nothing to record.
bool plan(void* handle, Job* job) {
  std::vector<Obj> objs;
  dl_iterate_phdr(collect_objects, &objs);
  // The handle is the object's link_map (glibc), but a bad handle must not
  // be dereferenced: find the object whose link_map it is. Initial objects
  // are never unloaded, so only later ones are candidates.
  size_t k = objs.size();
  for (size_t j = size_t(g_initial); j < objs.size() && k == objs.size(); ++j) {
    Dl_info info;
    void* lm = nullptr;
    if (objs[j].probe && dladdr1(reinterpret_cast<void*>(objs[j].probe), &info, &lm, RTLD_DL_LINKMAP) &&
        lm == handle)
      k = j;
  }
  if (k == objs.size()) return false;

  Pending& p = pending();
  int pid = int(getpid());
  int n = 0;
  const engine::Engine* const* engines = engine::all(&n);
  if (p.pid != pid) {
    p.pid = pid;
    p.cursors.assign(size_t(n), 0);
    p.addrs.clear();
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (size_t j = size_t(g_initial); j < objs.size(); ++j)
    ranges.insert(ranges.end(), objs[j].exec.begin(), objs[j].exec.end());
  std::sort(ranges.begin(), ranges.end());
  Collect c{&ranges, &p.addrs};
  for (int i = 0; i < n; ++i)
    if (engines[i]->for_each_since) engines[i]->for_each_since(&p.cursors[size_t(i)], collect_new, &c);
  std::vector<std::vector<uint64_t>> found(objs.size());
  for (auto it = p.addrs.begin(); it != p.addrs.end();) {
    size_t owner = objs.size();
    for (size_t j = k; j < objs.size() && owner == objs.size(); ++j)
      for (const auto& r : objs[j].exec)
        if (*it >= r.first && *it < r.second) owner = j;
    if (owner == objs.size()) {
      ++it;
      continue;
    }
    found[owner].push_back(*it);
    it = p.addrs.erase(it);  // recorded now, or by a record already
  }
  job->pid = int(getpid());
  std::unordered_set<uint64_t> done;
  for (const Record* p = records(); p; p = p->next)
    if (p->pid == job->pid) done.insert(p->addrs.begin(), p->addrs.end());
  for (size_t j = k; j < objs.size(); ++j) {
    std::vector<uint64_t>& a = found[j];
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
    a.erase(std::remove_if(a.begin(), a.end(), [&](uint64_t x) { return done.count(x) != 0; }), a.end());
    // The handle's own object is kept even with no sampled address, for the
    // mapping of its heap-sampled ones; objects loaded after it only when
    // there is something to name (most stay loaded).
    if (j != k && a.empty()) continue;
    if (a.empty() && known(objs[j], job->pid)) continue;  // nothing new: its mapping is kept already
    job->objs.push_back(std::move(objs[j]));
    job->addrs.push_back(std::move(a));
  }
  return !job->objs.empty();
}

// The recording runs on a thread of its own, joined at once: libdw needs
// far more stack (~150 KiB to read a line table) than a program's thread
// may have (a 64 KiB thread stack is legal), and that thread is not one the
// sampler times, so the shim's work is not in the program's CPU profile.
// Created with libc's pthread_create, not the shim's wrapper: not counted,
// not sampled.
void* helper(void* arg) {
  t_busy = true;  // a dlclose inside the symbolizer records nothing
  engine::quiet_thread();  // libdw's reads and allocations here are the shim's
  const Job& job = *static_cast<const Job*>(arg);
  // The thread-self view: after pthread_exit from main, /proc/self is the
  // exited leader.
  const std::string maps = sys::read_file(sys::proc_thread_self("maps").c_str());
  for (size_t i = 0; i < job.objs.size(); ++i) record(maps, job.objs[i], job.addrs[i], job.pid);
  return nullptr;
}

// On the program's thread: plan, then record on a helper thread, joined.
void plan_and_record(void* arg) {
  void* handle = arg;
  Job job;
  if (!plan(handle, &job)) return;
  int cancel_state;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);  // pthread_join is a cancellation point
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kHelperStack);
  // No signal of the program is ever handled there (glibc keeps its own
  // internal ones out of the mask).
  sigset_t all;
  sigfillset(&all);
  pthread_t t;
  if (glibc_compat::create_masked(g_create, &t, &attr, &all, helper, &job) == 0) pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  pthread_setcancelstate(cancel_state, nullptr);
}

}  // namespace

void before_dlclose(void* handle) {
  if (!handle || t_busy || !g_create) return;  // t_busy: the symbolizer's own dlclose, if any
  t_busy = true;
  stackwalk::Holding recording;  // its helper uses libdw, as the stop does
  const int saved_errno = errno;
  // The shim's allocations here are not the program's.
  const bool was = heap::swap_thread_active(false);
  // Out of memory here costs the record, not the program's dlclose.
  recover::run(plan_and_record, handle, nullptr);
  heap::set_thread_active(was);
  errno = saved_errno;
  t_busy = false;
}

}  // namespace unload
