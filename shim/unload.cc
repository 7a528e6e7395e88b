// unload: see unload.h.
#include "unload.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <unordered_set>
#include <utility>

#include "heap.h"
#include "procmaps.h"
#include "sampler.h"

// sampler.o and heap.o are not linked into the unit tests (the Makefile's
// CORE_OBJS), which link this file: referenced weakly, they are null there
// and everything here that needs them is skipped.
namespace sampler {
void for_each(void (*fn)(const Stack&, void*), void* arg) __attribute__((weak));
}
namespace heap {
void set_thread_active(bool on) __attribute__((weak));
}

namespace unload {
namespace {

// More records than this (a plugin reloaded at ever new addresses) are not
// kept: each holds a few mappings and the frames of its sampled addresses.
constexpr int kMaxRecords = 1024;

std::atomic<const Record*> g_head{nullptr};
std::atomic<int> g_records{0};
// How many objects dl_iterate_phdr reported when the shim's constructors ran:
// the program, its dependencies, the preloads. glibc never unloads these.
int g_initial = 0;
thread_local bool t_busy = false;

struct Obj {
  uint64_t lo = ~0ull, hi = 0;  // the span of its PT_LOAD segments, page-aligned
  uint64_t probe = 0;           // an address in its first PT_LOAD, for dladdr1
  std::vector<std::pair<uint64_t, uint64_t>> exec;  // [lo, hi) of PF_X segments
};

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
  out->push_back(std::move(o));
  return 0;
}

__attribute__((constructor)) void count_initial_objects() {
  const char* dir = getenv("PROFILE_DIR");
  if (!dir || !*dir) return;  // inert: nothing to remember
  int n = 0;
  dl_iterate_phdr(count_objects, &n);
  g_initial = n;
}

std::string read_maps() {
  std::string out;
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[65536];
  for (ssize_t r; (r = read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(r));
  close(fd);
  return out;
}

// The addresses finish will look up: the interrupted instruction as is,
// return addresses minus one (inside the call).
struct Scan {
  const std::vector<Obj>* objs;
  size_t from;
  std::vector<std::vector<uint64_t>>* found;  // per object
};

void scan_stack(const sampler::Stack& st, void* arg) {
  auto* s = static_cast<Scan*>(arg);
  for (uint32_t i = 0; i < st.depth; ++i) {
    uint64_t a = i == 0 ? st.pcs[i] : st.pcs[i] - 1;
    for (size_t j = s->from; j < s->objs->size(); ++j)
      for (const auto& r : (*s->objs)[j].exec)
        if (a >= r.first && a < r.second) (*s->found)[j].push_back(a);
  }
}

bool same_mappings(const std::vector<pprof::Mapping>& a, const std::vector<pprof::Mapping>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].start != b[i].start || a[i].limit != b[i].limit || a[i].offset != b[i].offset ||
        a[i].file != b[i].file || a[i].build_id != b[i].build_id)
      return false;
  return true;
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

void publish(Record* r) {
  const Record* head = g_head.load(std::memory_order_acquire);
  do {
    r->next = head;
  } while (!g_head.compare_exchange_weak(head, r, std::memory_order_release, std::memory_order_acquire));
}

// Records obj with the frames of addrs (sorted, unique, none recorded yet).
void record(const std::string& maps, const Obj& o, const std::vector<uint64_t>& addrs, int pid) {
  std::string text = lines_of(maps, o);
  if (text.empty()) return;
  auto* r = new Record;
  r->pid = pid;
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
  if (addrs.empty())  // nothing new to name: keep the mapping once only
    for (const Record* p = records(); p; p = p->next)
      if (p->pid == pid && same_mappings(p->mappings, r->mappings)) {
        delete r;
        return;
      }
  if (g_records.fetch_add(1) >= kMaxRecords) {
    delete r;
    return;
  }
  publish(r);
}

void work(void* handle) {
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
  if (k == objs.size()) return;

  std::vector<std::vector<uint64_t>> found(objs.size());
  if (sampler::for_each) {
    Scan scan{&objs, k, &found};
    sampler::for_each(scan_stack, &scan);
  }
  const int pid = int(getpid());
  std::unordered_set<uint64_t> done;
  for (const Record* p = records(); p; p = p->next)
    if (p->pid == pid) done.insert(p->addrs.begin(), p->addrs.end());
  std::string maps;
  for (size_t j = k; j < objs.size(); ++j) {
    std::vector<uint64_t>& a = found[j];
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
    a.erase(std::remove_if(a.begin(), a.end(), [&](uint64_t x) { return done.count(x) != 0; }), a.end());
    // The handle's own object is kept even with no sampled address, for the
    // mapping of its heap-sampled ones; objects loaded after it only when
    // there is something to name (most stay loaded).
    if (j != k && a.empty()) continue;
    if (maps.empty()) maps = read_maps();
    record(maps, objs[j], a, pid);
  }
}

}  // namespace

void before_dlclose(void* handle) {
  if (!handle || t_busy) return;  // the symbolizer's own dlclose, if any
  t_busy = true;
  // The shim's allocations here are not the program's.
  if (heap::set_thread_active) heap::set_thread_active(false);
  work(handle);
  if (heap::set_thread_active) heap::set_thread_active(true);
  t_busy = false;
}

const Record* records() { return g_head.load(std::memory_order_acquire); }

}  // namespace unload
