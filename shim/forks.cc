// forks: the hand-over area, its owner's and its children's sides; see
// forks.h. The area's layout is forks_area.h's.
#include "forks.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <unordered_map>
#include <vector>

#include "engine_table.h"
#include "forks_area.h"
#include "fsroot.h"
#include "heap.h"
#include "heap_dump.h"
#include "image.h"
#include "sandbox.h"
#include "sys.h"

namespace forks {
namespace {

const config::Config* g_cfg;
area::Header* g_area;       // mapped: the owner's, or inherited from it
bool g_owner;               // this image created g_area
bool g_child;               // a fork child that hands over at its stop
char g_path[4096];          // the area's file, the owner's (removed at its stop)
pthread_mutex_t g_create = PTHREAD_MUTEX_INITIALIZER;

bool g_create_failed;        // create() failed once: later forks do not retry

area::Slot* slots(area::Header* h) {
  return reinterpret_cast<area::Slot*>(reinterpret_cast<char*>(h) + area::kHeaderBytes);
}

// Writes all of n bytes at off; false on any error (ENOSPC, EDQUOT, EFBIG).
// The system call itself: the program's pwrite is a timed wrapper.
bool write_at(int fd, const char* p, size_t n, uint64_t off) {
  while (n) {
    const long w = syscall(SYS_pwrite64, fd, p, n, off_t(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w, n -= size_t(w), off += uint64_t(w);
  }
  return true;
}

// The slot index's pages given by the file system (the owner stores into
// every slot at its close): fallocate, which writes nothing, or zeros where
// the file system has no fallocate.
bool give_room(int fd, uint64_t end) {
  const uint64_t at = area::kHeaderBytes;
  if (syscall(SYS_fallocate, fd, 0, off_t(at), off_t(end - at)) == 0) return true;
  if (errno != EOPNOTSUPP && errno != ENOSYS) return false;
  std::vector<char> zeros(end - at);
  return write_at(fd, zeros.data(), zeros.size(), at);
}

// Creates and maps .STEM.PID.spool; null where it cannot (then every child
// writes its own files, as in own mode).
area::Header* create() {
  std::string path = g_cfg->dir + "/." + image::stem() + "." + std::to_string(image::pid()) + ".spool";
  const uint64_t size = g_cfg->forks_spool;
  const uint32_t nslots = area::slots_for(size);
  const uint64_t data_off = area::data_off_for(nslots);
  if (path.size() >= sizeof g_path || size <= data_off) return nullptr;
  // A file of this name is another pid namespace's (or a dead image's):
  // never truncated under a mapping, a new one made instead.
  fsroot::unlink(path.c_str());
  int fd = fsroot::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return nullptr;
  // The header and the slot index written, not mapped into being: on a
  // full file system a store to a sparse page is SIGBUS. Past RLIMIT_FSIZE
  // ftruncate raises SIGXFSZ: no area rather than that.
  std::vector<char> head(area::kHeaderBytes);
  auto* h0 = reinterpret_cast<area::Header*>(head.data());
  h0->magic = area::kMagic;
  h0->version = area::kVersion;
  h0->owner_pid = int32_t(image::pid());
  h0->state = area::kOpen;
  h0->capacity = size - data_off;
  h0->slot_max = nslots;
  h0->data_off = data_off;
  h0->start_real_ns = sys::now_ns(CLOCK_REALTIME);
  snprintf(h0->stem, sizeof h0->stem, "%s", image::stem().c_str());
  void* p = MAP_FAILED;
  const int saved = errno;
  if (sys::fsize_room(fd) >= size && write_at(fd, head.data(), head.size(), 0) && give_room(fd, data_off) &&
      ftruncate(fd, off_t(size)) == 0)
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  errno = saved;
  if (p == MAP_FAILED) {
    fsroot::unlink(path.c_str());
    return nullptr;
  }
  sys::dont_dump(p, size);  // a coredump_filter with bit 3 set would write it whole
  memcpy(g_path, path.c_str(), path.size() + 1);
  return static_cast<area::Header*>(p);
}

// Whether the area's owner still runs. A direct child asks getppid; a
// grandchild kill(owner, 0), which a filter that forbids it has already
// made hand-over forbidden (sandbox.h).
bool owner_alive(int32_t pid) {
  if (getppid() == pid) return true;
  if (sandbox::hand_over_forbidden()) return false;
  const int saved = errno;
  const bool alive = syscall(SYS_kill, pid, 0) == 0 || errno == EPERM;
  errno = saved;
  return alive;
}

// A child's blob into the file at its place, through a descriptor of its
// own (the owner's was closed at the area's making): pwrite fails where
// the file system has no room, where a store into the mapping would fault.
bool write_blob(const std::vector<char>& bytes, uint64_t at) {
  const int saved = errno;
  int fd = fsroot::open(g_path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  // Past RLIMIT_FSIZE (the child may have lowered it) pwrite is SIGXFSZ.
  bool ok = fd >= 0 && sys::fsize_room(fd) >= at + bytes.size() && write_at(fd, bytes.data(), bytes.size(), at);
  if (fd >= 0) ::close(fd);
  errno = saved;
  return ok;
}

// One child's blob, built before its place is reserved.
struct Blob {
  std::vector<char> bytes;
  uint32_t n = 0;
  void add(uint32_t kind, const uint64_t* pcs, uint32_t depth, int32_t tid, uint32_t tag, uint64_t count,
           uint64_t weight, const std::string& name) {
    area::Record r{};
    r.kind = kind, r.depth = depth, r.tid = tid, r.tag = tag, r.count = count, r.weight = weight;
    memcpy(r.name, name.data(), name.size() < sizeof r.name ? name.size() : sizeof r.name - 1);
    const size_t at = bytes.size();
    bytes.resize(at + sizeof r + depth * sizeof(uint64_t));
    memcpy(&bytes[at], &r, sizeof r);
    if (depth) memcpy(&bytes[at + sizeof r], pcs, depth * sizeof(uint64_t));
    ++n;
  }
};

struct TableWalk {
  Blob* blob;
  uint32_t kind;
  const engine::TableSource* src;
  std::unordered_map<uint32_t, std::string> names;
};

void add_stack(const stack_table::Stack& st, void* arg) {
  auto* w = static_cast<TableWalk*>(arg);
  if (!st.count && !st.weight) return;
  auto it = w->names.find(st.serial);
  if (it == w->names.end()) it = w->names.emplace(st.serial, w->src->thread_name(st.serial)).first;
  w->blob->add(w->kind, st.pcs, st.depth, st.tid, st.tag, st.count, st.weight, it->second);
}

// The heap's cumulative records since the fork (after_fork_in_child reset
// them): alloc_objects and alloc_space, as estimated totals.
void add_heap(Blob* blob) {
  std::string text, err;
  heap_dump::Dump dump;
  if (!heap::dump(&text, &err) || !heap_dump::parse(text, &dump, &err)) return;
  for (const auto& rec : dump.records) {
    if (rec.alloc_space < 0.5) continue;
    blob->add(area::kHeap, rec.pcs.data(), uint32_t(rec.pcs.size()), 0, 0, uint64_t(rec.alloc_objects + 0.5),
              uint64_t(rec.alloc_space + 0.5), std::string());
  }
}

uint32_t kind_of(const char* name) {
  if (strcmp(name, "cpu") == 0) return area::kCpu;
  if (strcmp(name, "wait") == 0) return area::kWait;
  if (strcmp(name, "heap") == 0) return area::kHeap;
  return 0;
}

}  // namespace

void setup(const config::Config* cfg) { g_cfg = cfg; }

void before_fork() {
  // Under a filter that forbids the hand-over's calls no child could hand over.
  if (!g_cfg || g_cfg->forks_own || sandbox::stop_forbidden() || sandbox::hand_over_forbidden()) return;
  area::Header* h = __atomic_load_n(&g_area, __ATOMIC_ACQUIRE);
  if (h && g_owner) return;
  pthread_mutex_lock(&g_create);
  h = g_area;
  // An inherited area its owner closed (a daemon whose launcher has ended):
  // this process's children hand over to it instead, a new area's owner.
  if (h && !g_owner && __atomic_load_n(&h->state, __ATOMIC_SEQ_CST) != area::kOpen) {
    munmap(h, g_cfg->forks_spool);
    __atomic_store_n(&g_area, (area::Header*)nullptr, __ATOMIC_RELEASE);
    g_child = false;
    h = nullptr;
  }
  if (!h && !g_create_failed) {
    h = create();
    g_create_failed = !h;
    if (h) g_owner = true;
    __atomic_store_n(&g_area, h, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_create);
}

void after_fork_in_child() {
  g_owner = false;
  g_child = g_area != nullptr;
  pthread_mutex_init(&g_create, nullptr);
  // The child's heap counts begin at the fork: what it hands over is what
  // it allocated itself, not what the parent allocated before it.
  if (g_child && heap::started()) heap::reset_counts(uint64_t(image::pid()));
}

bool hand_over(uint64_t cpu_ns) {
  area::Header* h = g_area;
  if (!g_child || !h || sandbox::hand_over_forbidden()) return false;
  if (__atomic_load_n(&h->state, __ATOMIC_SEQ_CST) != area::kOpen || !owner_alive(h->owner_pid)) return false;
  Blob blob;
  blob.bytes.resize(sizeof(area::BlobHeader));
  int n = 0;
  const engine::Engine* const* all = engine::all(&n);
  for (int i = 0; i < n; ++i) {
    if (!all[i]->on()) continue;
    const uint32_t kind = kind_of(all[i]->name);
    if (all[i]->table) {
      TableWalk w{&blob, kind, all[i]->table, {}};
      all[i]->table->for_each(add_stack, &w);
    } else if (kind == area::kHeap) {
      add_heap(&blob);
    }
  }
  while (blob.bytes.size() % 8) blob.bytes.push_back(0);
  reinterpret_cast<area::BlobHeader*>(blob.bytes.data())->records = blob.n;
  const uint64_t len = blob.bytes.size();
  // Registered, then the state read: the owner closes first, then waits for
  // no writer (both sequentially consistent), so a child either sees the
  // area closed or is waited for. Between the two counts only atomics and
  // system calls: nothing that faults, so nothing that skips the release.
  __atomic_add_fetch(&h->writers, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&h->state, __ATOMIC_SEQ_CST) != area::kOpen) {
    __atomic_sub_fetch(&h->writers, 1, __ATOMIC_SEQ_CST);
    return false;
  }
  const uint32_t i = __atomic_fetch_add(&h->nslots, 1, __ATOMIC_SEQ_CST);
  const uint64_t off = i < h->slot_max ? __atomic_fetch_add(&h->used, len, __ATOMIC_SEQ_CST) : 0;
  area::Slot* sl = i < h->slot_max ? &slots(h)[i] : nullptr;
  bool ok = sl && off + len <= h->capacity;
  if (ok) {
    sl->pid = int32_t(image::pid()), sl->off = off, sl->len = len, sl->cpu_ns = cpu_ns;
    ok = write_blob(blob.bytes, h->data_off + off);
  }
  bool published = false;
  if (ok) {
    uint32_t expect = area::kWriting;
    // Fails where the owner gave the slot up (its wait ran out): the
    // samples never reach it, so this child writes its own files.
    published = __atomic_compare_exchange_n(&sl->state, &expect, area::kReady, false, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST);
  } else {
    // No room (slots, area, or the file system): this child writes its own
    // files, and the owner's line says so.
    if (sl) {
      uint32_t expect = area::kWriting;
      __atomic_compare_exchange_n(&sl->state, &expect, area::kAbandoned, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    __atomic_add_fetch(&h->fell_back, 1, __ATOMIC_SEQ_CST);
  }
  if (published) {
    __atomic_add_fetch(&h->merged, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&h->merged_cpu_ns, cpu_ns, __ATOMIC_SEQ_CST);
  }
  __atomic_sub_fetch(&h->writers, 1, __ATOMIC_SEQ_CST);
  return published;
}

void close(uint64_t deadline_mono_ns) {
  area::Header* h = g_area;
  if (!g_owner || !h) return;
  __atomic_store_n(&h->state, area::kClosed, __ATOMIC_SEQ_CST);
  // A child mid-copy takes microseconds; one killed mid-copy never ends:
  // the wait is bounded.
  uint64_t now = sys::now_ns(CLOCK_MONOTONIC), end = now + 1000000000ull;
  if (deadline_mono_ns && deadline_mono_ns < end) end = deadline_mono_ns;
  while (__atomic_load_n(&h->writers, __ATOMIC_SEQ_CST) != 0 && sys::now_ns(CLOCK_MONOTONIC) < end) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
  // What is not ready now never will be: given up, so that a child still
  // writing learns its samples did not arrive (its publish fails).
  const uint32_t ns = __atomic_load_n(&h->nslots, __ATOMIC_SEQ_CST);
  for (uint32_t i = 0; i < ns && i < h->slot_max; ++i) {
    uint32_t expect = area::kWriting;
    __atomic_compare_exchange_n(&slots(h)[i].state, &expect, area::kAbandoned, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
  }
}

void merge(const engine::Engine& e, engine::Why why, const engine::Self& self, engine::Part* part) {
  area::Header* h = g_area;
  if (!g_owner || !h) return;
  const uint32_t kind = kind_of(e.name);
  if (!kind || (kind != area::kHeap && !e.table)) return;
  const uint32_t taken = kind == area::kCpu ? uint32_t(area::kTakenCpu) : kind == area::kWait ? uint32_t(area::kTakenWait) : 0u;
  const uint32_t ns = __atomic_load_n(&h->nslots, __ATOMIC_ACQUIRE);
  const char* base = reinterpret_cast<const char*>(h) + h->data_off;
  for (uint32_t i = 0; i < ns && i < h->slot_max; ++i) {
    area::Slot* sl = &slots(h)[i];
    const uint32_t st = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);
    if (!(st & area::kReady) || (st & taken)) continue;
    if (sl->len < sizeof(area::BlobHeader) || sl->off + sl->len > h->capacity) continue;
    // A snapshot's CPU and waits are what was handed over since the last
    // one; the stop's are what no snapshot took (engine_table.h's rule).
    if (taken && why == engine::Why::kSnapshot) __atomic_fetch_or(&sl->state, taken, __ATOMIC_ACQ_REL);
    const auto* bh = reinterpret_cast<const area::BlobHeader*>(base + sl->off);
    const uint64_t len = sl->len;
    const char* p = reinterpret_cast<const char*>(bh) + sizeof(area::BlobHeader);
    const char* end = reinterpret_cast<const char*>(bh) + len;
    for (uint32_t j = 0; j < bh->records && p + sizeof(area::Record) <= end; ++j) {
      const auto* r = reinterpret_cast<const area::Record*>(p);
      const uint64_t* pcs = reinterpret_cast<const uint64_t*>(p + sizeof(area::Record));
      p += sizeof(area::Record) + r->depth * sizeof(uint64_t);
      if (p > end || r->kind != kind) continue;
      engine::Sample s;
      if (kind == area::kHeap) {
        if (!engine::heap_sample_of(pcs, r->depth, self, &s)) continue;
        // What the child still held at its end is no part of this image's
        // memory: the child's samples have alloc_* only.
        s.values = {int64_t(r->count), int64_t(r->weight), 0, 0};
      } else {
        stack_table::Stack stk{pcs, r->depth, r->tid, 0, r->count, r->weight, r->tag, 0};
        std::string name(r->name, strnlen(r->name, sizeof r->name));
        if (!engine::table_sample_of(*e.table, stk, name, self, &s)) continue;
      }
      s.pid = sl->pid;
      part->samples.push_back(std::move(s));
    }
  }
}

// Children whose blob the owner has (ready slots) and their CPU: from the
// slots, not the header's counts, which a child adds to after publishing.
void ready(area::Header* h, uint64_t* merged, uint64_t* cpu_ns) {
  *merged = *cpu_ns = 0;
  const uint32_t ns = __atomic_load_n(&h->nslots, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < ns && i < h->slot_max; ++i)
    if (__atomic_load_n(&slots(h)[i].state, __ATOMIC_ACQUIRE) & area::kReady) ++*merged, *cpu_ns += slots(h)[i].cpu_ns;
}

void figures(summary::Figures* f) {
  area::Header* h = g_area;
  if (!g_owner || !h) return;
  uint64_t merged, cpu;
  ready(h, &merged, &cpu);
  const uint64_t fell = __atomic_load_n(&h->fell_back, __ATOMIC_ACQUIRE);
  if (!merged && !fell) return;
  char b[200];
  snprintf(b, sizeof b, " | forks %llu merged (%.2f s cpu, pid labels)", (unsigned long long)merged,
           double(cpu) / 1e9);
  std::string s = b;
  if (fell) {
    snprintf(b, sizeof b, ", %llu wrote their own files (no room in the hand-over area: PROFILE_FORKS_SPOOL, or its file system)",
             (unsigned long long)fell);
    s += b;
  }
  f->more.push_back(s);
}

void release() {
  if (g_owner && g_area && g_path[0]) fsroot::unlink(g_path);
}

namespace {
// After a stop that writes nothing: what children handed over stays, named
// after sep; with nothing handed over the area's file goes.
std::string keep_or_release(const char* sep) {
  uint64_t merged, cpu;
  ready(g_area, &merged, &cpu);
  if (!merged) {
    release();
    return std::string();
  }
  return sep + std::to_string(merged) + " forked processes' samples stay in " + g_path + " (profshim ls)";
}
}  // namespace

std::string nothing_written() { return g_owner && g_area ? keep_or_release(" | ") : std::string(); }

std::string give_up() {
  if (!g_owner || !g_area) return std::string();
  close(sys::now_ns(CLOCK_MONOTONIC) + 200000000ull);
  return keep_or_release("; ");
}

void reopen() {
  if (g_owner && g_area) __atomic_store_n(&g_area->state, area::kOpen, __ATOMIC_SEQ_CST);
}

std::string marker_field() {
  area::Header* h = g_area;
  if (!g_owner || !h) return std::string();
  uint64_t merged, cpu;
  ready(h, &merged, &cpu);
  if (!merged) return std::string();
  return " forks=" + std::to_string(merged) + ":" + std::to_string(cpu);
}

}  // namespace forks
