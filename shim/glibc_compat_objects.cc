// glibc_compat_objects: _dl_find_object before glibc 2.35, made from a table
// of the loaded objects and, for one loaded since, the loader's list; see
// glibc_compat.h and docs/DESIGN.md "Which glibc".
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "glibc_compat.h"
#include "sys.h"

#define HIDDEN extern "C" __attribute__((visibility("hidden")))

namespace glibc_compat {
namespace {

using FindObject = int (*)(void*, void*);
FindObject g_find_object;  // 2.35
// objects_init() ran. Before it (jemalloc's boot walks a stack in the first
// malloc) no handler of the shim's can run, and a lookup makes the table if
// there is none yet.
int g_inited;

}  // namespace

void objects_init() {
  g_find_object = reinterpret_cast<FindObject>(dlsym(RTLD_DEFAULT, "_dl_find_object"));
  find_loader_lock();
  refresh_objects();
  __atomic_store_n(&g_inited, 1, __ATOMIC_RELEASE);
}

namespace {

// Before 2.35 the stack walks read a table of the loaded objects, never the
// loader's list: dl_iterate_phdr takes the loader's lock, and a sampling
// signal that lands while the program's own thread holds it (every C++
// throw of GCC 10's libgcc, every dlopen) would wait on itself for ever. The
// table is made outside any handler (setup, before each dlopen, after each
// dlclose) and published under a sequence count; a walk that meets it
// mid-update ends there, as at a frame with no unwind information, and a
// pc in no object it holds is looked up in the loader's list (below).
struct Obj {
  uintptr_t lo, hi, eh;
  struct link_map* lm;
};
constexpr int kObjs = 1024;
Obj g_objs[kObjs];
int g_nobjs;
unsigned g_seq;        // odd while the table is rewritten
int g_refreshing;      // one refresher at a time
int g_stale;           // objects may have come or gone since the table was made
Obj g_scratch[kObjs];  // (under g_refreshing)
int g_nscratch;

// An object's span (its first to its last loadable segment), its
// .eh_frame_hdr and its link map (found by its dynamic section), as
// dl_iterate_phdr reports it; hi is 0 for one with nothing loaded.
Obj object_of(const struct dl_phdr_info* info) {
  Obj o{UINTPTR_MAX, 0, 0, nullptr};
  uintptr_t dyn = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD) {
      if (start < o.lo) o.lo = start;
      if (start + ph.p_memsz > o.hi) o.hi = start + ph.p_memsz;
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      o.eh = start;
    } else if (ph.p_type == PT_DYNAMIC) {
      dyn = start;
    }
  }
  if (o.lo >= o.hi) return Obj{0, 0, 0, nullptr};
  for (struct link_map* m = _r_debug.r_map; m && dyn; m = m->l_next)
    if (uintptr_t(m->l_ld) == dyn) {
      o.lm = m;
      break;
    }
  return o;
}

int add_obj(struct dl_phdr_info* info, size_t, void*) {
  if (g_nscratch >= kObjs) return 1;
  const Obj o = object_of(info);
  if (o.hi) g_scratch[g_nscratch++] = o;
  return 0;
}

}  // namespace

void refresh_objects() {
  if (g_find_object) return;  // libc's own, lock-free
  while (__atomic_exchange_n(&g_refreshing, 1, __ATOMIC_ACQUIRE)) sched_yield();
  __atomic_store_n(&g_stale, 0, __ATOMIC_RELAXED);
  g_nscratch = 0;
  dl_iterate_phdr(add_obj, nullptr);
  __atomic_store_n(&g_seq, g_seq + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  memcpy(g_objs, g_scratch, sizeof(Obj) * size_t(g_nscratch));
  __atomic_store_n(&g_nobjs, g_nscratch, __ATOMIC_RELAXED);
  __atomic_store_n(&g_seq, g_seq + 1, __ATOMIC_RELEASE);
  __atomic_store_n(&g_refreshing, 0, __ATOMIC_RELEASE);
}

void mark_stale() { __atomic_store_n(&g_stale, 1, __ATOMIC_RELAXED); }

void refresh_if_stale() {
  if (__atomic_load_n(&g_stale, __ATOMIC_RELAXED)) refresh_objects();
}

namespace {

// A pc in no object of the table: one loaded since it was made (dlopen's
// refresh comes only at the next dlopen, dlclose or thread start, the call
// itself being passed on as a jump). The loader's list is read then with
// dl_iterate_phdr, which takes the loader's recursive write lock, and what
// it finds joins the table. Never waited for: the lock is taken by trylock,
// and only when it is free. Held by this thread, it may be halfway taken
// or released (the thread would wait on itself) or held by the loader's
// own dlclose between unmapping an object and unlinking it; held by
// another, it is not waited for. The lock is found at init by looking for
// it in the loader's globals while a dl_iterate_phdr of ours holds it; not
// found, no live lookup is made. Lookups that find nothing (code a JIT
// made) are rationed: one per 10 ms in the process.
struct MutexWords {  // the first words of glibc's struct __pthread_mutex_s, the same on x86-64 and aarch64
  int lock;
  unsigned count;
  int owner;
  unsigned nusers;
  int kind;
};
constexpr int kRecursive = 1;  // PTHREAD_MUTEX_RECURSIVE_NP
MutexWords* g_write_lock;
uint64_t g_next_live_ns;  // no live lookup before this, after one that found nothing to keep
constexpr uint64_t kLiveGapNs = 10000000;

struct LockSearch {
  const char *lo, *hi;
  int tid, found;
  MutexWords* at;
};

int search_lock(struct dl_phdr_info*, size_t, void* p) {
  auto* q = static_cast<LockSearch*>(p);
  for (const char* c = q->lo; c + sizeof(MutexWords) <= q->hi; c += 8) {
    const MutexWords* m = reinterpret_cast<const MutexWords*>(c);
    if (m->lock != 0 && m->owner == q->tid && m->count >= 1 && m->kind == kRecursive)
      ++q->found, q->at = const_cast<MutexWords*>(m);
  }
  return 1;
}

struct Live {
  uintptr_t pc;
  Obj found;
};

int find_live(struct dl_phdr_info* info, size_t, void* p) {
  auto* live = static_cast<Live*>(p);
  const Obj o = object_of(info);
  if (live->pc < o.lo || live->pc >= o.hi) return 0;
  live->found = o;
  return 1;
}

bool lookup_live(uintptr_t at, Obj* out) {
  MutexWords* lock = g_write_lock;
  if (!lock) return false;
  const uint64_t now = sys::now_ns(CLOCK_MONOTONIC);
  if (now < __atomic_load_n(&g_next_live_ns, __ATOMIC_RELAXED)) return false;
  // Only a free lock: one this thread holds may be halfway released (its
  // count 0, its owner not yet cleared), or held by the loader's own
  // dlclose between unmapping an object and unlinking it.
  if (__atomic_load_n(&lock->lock, __ATOMIC_ACQUIRE) != 0) return false;
  pthread_mutex_t* mutex = reinterpret_cast<pthread_mutex_t*>(lock);
  if (pthread_mutex_trylock(mutex) != 0) return false;
  const unsigned seq = __atomic_load_n(&g_seq, __ATOMIC_ACQUIRE);
  Live live{at, {0, 0, 0, nullptr}};
  dl_iterate_phdr(find_live, &live);  // takes the lock again: this thread's, recursive
  pthread_mutex_unlock(mutex);
  bool kept = false;
  // Kept if no refresh is under way (never waited for here: this may be a
  // handler that interrupted one) and none came since the lock was let go
  // (a dlclose's: the object may be gone).
  if (live.found.hi && !(seq & 1) && !__atomic_exchange_n(&g_refreshing, 1, __ATOMIC_ACQUIRE)) {
    const int n = g_nobjs;
    if (n < kObjs && __atomic_load_n(&g_seq, __ATOMIC_RELAXED) == seq) {
      __atomic_store_n(&g_seq, seq + 1, __ATOMIC_RELAXED);
      __atomic_thread_fence(__ATOMIC_RELEASE);
      g_objs[n] = live.found;
      __atomic_store_n(&g_nobjs, n + 1, __ATOMIC_RELAXED);
      __atomic_store_n(&g_seq, seq + 2, __ATOMIC_RELEASE);
      kept = true;
    }
    __atomic_store_n(&g_refreshing, 0, __ATOMIC_RELEASE);
  }
  if (!kept) __atomic_store_n(&g_next_live_ns, now + kLiveGapNs, __ATOMIC_RELAXED);
  *out = live.found;
  return live.found.hi != 0;
}

// The table's entry that holds at: 1 found, 0 none, -1 the table changed
// while it was read.
int in_table(uintptr_t at, Obj* found) {
  const unsigned seq = __atomic_load_n(&g_seq, __ATOMIC_ACQUIRE);
  if (seq & 1) return -1;
  *found = Obj{0, 0, 0, nullptr};
  const int n = __atomic_load_n(&g_nobjs, __ATOMIC_RELAXED);
  for (int i = 0; i < n && i < kObjs; ++i) {
    const Obj o = g_objs[i];
    if (at >= o.lo && at < o.hi) {
      *found = o;
      break;
    }
  }
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if (__atomic_load_n(&g_seq, __ATOMIC_RELAXED) != seq) return -1;
  return found->hi != 0;
}

}  // namespace

bool live_lookups() { return g_write_lock != nullptr; }

bool holds_loader_lock() {
  const MutexWords* lock = g_write_lock;
  return lock && __atomic_load_n(&lock->lock, __ATOMIC_ACQUIRE) != 0 &&
         __atomic_load_n(&lock->owner, __ATOMIC_RELAXED) == int(syscall(SYS_gettid));
}

void find_loader_lock() {
  void* g = dlsym(RTLD_DEFAULT, "_rtld_global");
  Dl_info info;
  void* entry = nullptr;
  if (!g || !dladdr1(g, &info, &entry, RTLD_DL_SYMENT) || !entry) return;
  const ElfW(Sym)* sym = static_cast<const ElfW(Sym)*>(entry);
  if (!sym->st_size) return;
  LockSearch q{static_cast<const char*>(g), static_cast<const char*>(g) + sym->st_size,
               int(syscall(SYS_gettid)), 0, nullptr};
  dl_iterate_phdr(search_lock, &q);
  // The one recursive mutex this thread held there, and free again now.
  if (q.found == 1 && q.at->lock == 0 && q.at->owner == 0) g_write_lock = q.at;
}

int dl_find_object(void* pc, FoundObject* result) {
  if (FindObject f = g_find_object) return f(pc, result);
  if (!__atomic_load_n(&g_inited, __ATOMIC_ACQUIRE) && !__atomic_load_n(&g_nobjs, __ATOMIC_RELAXED)) refresh_objects();
  const uintptr_t at = uintptr_t(pc);
  Obj found;
  int got = -1;
  for (int tries = 0; tries < 3 && got < 0; ++tries) got = in_table(at, &found);  // a refresh under way
  if (got < 0) return -1;
  if (!got && !lookup_live(at, &found)) {
    mark_stale();  // loaded without dlopen (glibc's NSS modules)
    return -1;
  }
  if (!found.eh) return -1;
  *result = FoundObject{};
  result->map_start = reinterpret_cast<void*>(found.lo & ~uintptr_t(4095));
  result->map_end = reinterpret_cast<void*>(found.hi);  // as the loader keeps it: not rounded
  result->link_map = found.lm;
  result->eh_frame = reinterpret_cast<void*>(found.eh);
  return 0;
}

}  // namespace glibc_compat

// libgcc's own lookup (GCC 12 and later), linked in though fde_lookup
// stands in for it, calls _dl_find_object: bound here, not to 2.35's.
HIDDEN int __wrap__dl_find_object(void* pc, void* result) {
  return glibc_compat::dl_find_object(pc, static_cast<glibc_compat::FoundObject*>(result));
}
