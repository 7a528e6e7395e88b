// glibc_compat: what stands in for calls newer than glibc 2.31 behaves as
// the call does where libc has it. Before init() the stand-ins take their
// fallback paths, as on glibc 2.31; after it, libc's where present.
#include "glibc_compat.h"
#include "check.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

namespace {

using LibcFind = int (*)(void*, glibc_compat::FoundObject*);

// The end of the last loadable segment of the object that holds pc.
struct LastEnd {
  uintptr_t pc, end;
};
int last_end_of(struct dl_phdr_info* info, size_t, void* p) {
  auto* q = static_cast<LastEnd*>(p);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_LOAD) {
      uintptr_t s = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
      if (s < lo) lo = s;
      if (s + info->dlpi_phdr[i].p_memsz > hi) hi = s + info->dlpi_phdr[i].p_memsz;
    }
  if (q->pc >= lo && q->pc < hi) q->end = hi;
  return q->end != 0;
}

// Before init: libc's answer (2.35+) field for field, but for the end. The
// stand-in ends an object at its last segment's end, as the loader records
// a library it maps; libc's own ends a main program whose segments have a
// gap between them (aarch64's 64 KiB alignment) at its first segment's end.
TEST(dl_find_object_fallback_matches_libcs) {
  auto libc = reinterpret_cast<LibcFind>(dlsym(RTLD_DEFAULT, "_dl_find_object"));
  if (!libc) return;  // a libc older than 2.35: nothing to compare with
  void* pcs[] = {reinterpret_cast<void*>(&dl_find_object_fallback_matches_libcs), reinterpret_cast<void*>(&memcpy),
                 reinterpret_cast<void*>(&pthread_create), reinterpret_cast<void*>(&dlopen)};
  for (void* pc : pcs) {
    glibc_compat::FoundObject ours{}, theirs{};
    CHECK_EQ(glibc_compat::dl_find_object(pc, &ours), 0);
    CHECK_EQ(libc(pc, &theirs), 0);
    LastEnd last = {reinterpret_cast<uintptr_t>(pc), 0};
    dl_iterate_phdr(last_end_of, &last);
    CHECK(ours.map_start == theirs.map_start);
    CHECK(reinterpret_cast<uintptr_t>(ours.map_end) == last.end);
    CHECK(ours.map_end >= theirs.map_end);
    CHECK(ours.link_map == theirs.link_map);
    CHECK(ours.eh_frame == theirs.eh_frame);
  }
}

// Whether pc lies between an object's first and last segment (a page the
// kernel put in a hole between the segments of ld.so, which the kernel maps
// one by one on glibc 2.31, is the object's, for libc's lookup as for ours).
int spans(struct dl_phdr_info* info, size_t, void* p) {
  LastEnd last = {*static_cast<uintptr_t*>(p), 0};
  last_end_of(info, 0, &last);
  uintptr_t lo = UINTPTR_MAX;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_addr + info->dlpi_phdr[i].p_vaddr < lo)
      lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
  return last.end != 0 && last.pc >= lo;
}

TEST(dl_find_object_outside_every_object) {
  void* pages[8];
  int n = 0;
  void* page = MAP_FAILED;
  while (n < 8) {
    void* p = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    if (p == MAP_FAILED) break;
    pages[n++] = p;
    uintptr_t at = reinterpret_cast<uintptr_t>(p);
    if (!dl_iterate_phdr(spans, &at)) {
      page = p;
      break;
    }
  }
  CHECK(page != MAP_FAILED);
  glibc_compat::FoundObject fo{};
  if (page != MAP_FAILED) CHECK_EQ(glibc_compat::dl_find_object(page, &fo), -1);
  for (int i = 0; i < n; ++i) munmap(pages[i], 4096);
}

// The object dl_iterate_phdr places pc in: its eh_frame_hdr, or 0.
struct EhOf {
  uintptr_t pc, eh;
};
int eh_of(struct dl_phdr_info* info, size_t, void* p) {
  auto* q = static_cast<EhOf*>(p);
  bool in = false;
  uintptr_t eh = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t s = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && q->pc >= s && q->pc < s + ph.p_memsz) in = true;
    if (ph.p_type == PT_GNU_EH_FRAME) eh = s;
  }
  if (in) q->eh = eh;
  return in;
}

// A thread that holds the loader's list lock (inside a dl_iterate_phdr
// callback) until told to let go.
struct Holder {
  int inside = 0, release = 0;
};
int hold_lock(struct dl_phdr_info*, size_t, void* p) {
  auto* h = static_cast<Holder*>(p);
  __atomic_store_n(&h->inside, 1, __ATOMIC_RELEASE);
  while (!__atomic_load_n(&h->release, __ATOMIC_ACQUIRE)) usleep(1000);
  return 1;
}
void* holder_thread(void* p) {
  dl_iterate_phdr(hold_lock, p);
  return nullptr;
}

// The objects' table (before init, as on glibc 2.31 after it) and a library
// loaded since it was made: while another thread holds the loader's lock,
// not found, and the lookup does not wait; once the lock is free, found in
// the loader's list; from then on kept in the table, found with the lock
// held elsewhere. Inside a dl_iterate_phdr callback of this thread's own,
// another such library is not found (nor waited for) until the lock is free.
TEST(dl_find_object_fallback_finds_a_library_loaded_since) {
  glibc_compat::find_loader_lock();
  CHECK(glibc_compat::live_lookups());
  glibc_compat::refresh_objects();
  void* h = dlopen("libelf.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(h != nullptr);
  if (!h || !glibc_compat::live_lookups()) return;
  void* pc = dlsym(h, "elf_version");
  CHECK(pc != nullptr);
  EhOf want = {reinterpret_cast<uintptr_t>(pc), 0};
  dl_iterate_phdr(eh_of, &want);
  CHECK(want.eh != 0);

  Holder held;
  pthread_t t;
  pthread_create(&t, nullptr, holder_thread, &held);
  while (!__atomic_load_n(&held.inside, __ATOMIC_ACQUIRE)) usleep(1000);
  glibc_compat::FoundObject fo{};
  CHECK_EQ(glibc_compat::dl_find_object(pc, &fo), -1);
  __atomic_store_n(&held.release, 1, __ATOMIC_RELEASE);
  pthread_join(t, nullptr);

  usleep(20000);  // past the gap a lookup that found nothing leaves
  CHECK_EQ(glibc_compat::dl_find_object(pc, &fo), 0);
  CHECK(reinterpret_cast<uintptr_t>(fo.eh_frame) == want.eh);
  CHECK(fo.link_map != nullptr);

  Holder again;
  pthread_create(&t, nullptr, holder_thread, &again);
  while (!__atomic_load_n(&again.inside, __ATOMIC_ACQUIRE)) usleep(1000);
  fo = {};
  CHECK_EQ(glibc_compat::dl_find_object(pc, &fo), 0);
  CHECK(reinterpret_cast<uintptr_t>(fo.eh_frame) == want.eh);
  __atomic_store_n(&again.release, 1, __ATOMIC_RELEASE);
  pthread_join(t, nullptr);

  // Inside a dl_iterate_phdr callback of this thread's own, the lock is not
  // free (held whole, or maybe halfway released, as far as a handler can
  // tell): another such library is not looked up live, and nothing waits.
  void* h2 = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
  void* pc2 = h2 ? dlsym(h2, "dwarf_begin") : nullptr;
  CHECK(pc2 != nullptr);
  struct Inside {
    void* pc;
    int rc;
    bool holds;
  } in = {pc2, -2, false};
  usleep(20000);
  dl_iterate_phdr(
      [](struct dl_phdr_info*, size_t, void* p) {
        auto* q = static_cast<Inside*>(p);
        glibc_compat::FoundObject f{};
        q->rc = glibc_compat::dl_find_object(q->pc, &f);
        q->holds = glibc_compat::holds_loader_lock();
        return 1;
      },
      &in);
  CHECK_EQ(in.rc, -1);
  CHECK(in.holds);
  CHECK(!glibc_compat::holds_loader_lock());
  // Free again: found.
  usleep(20000);
  glibc_compat::FoundObject f2{};
  CHECK_EQ(glibc_compat::dl_find_object(pc2, &f2), 0);
  EhOf want2 = {reinterpret_cast<uintptr_t>(pc2), 0};
  dl_iterate_phdr(eh_of, &want2);
  CHECK(reinterpret_cast<uintptr_t>(f2.eh_frame) == want2.eh && want2.eh != 0);
  if (h2) dlclose(h2);
  dlclose(h);
  glibc_compat::refresh_objects();
}

sigset_t g_seen;
void* report_mask(void*) {
  pthread_sigmask(SIG_BLOCK, nullptr, &g_seen);
  return nullptr;
}

// The new thread starts with the mask asked for, the creator's own is
// unchanged: both paths (blocking around the create before init, the
// attribute after it where libc has pthread_attr_setsigmask_np).
void create_with_mask_once() {
  sigset_t want, before, after;
  sigemptyset(&want);
  sigaddset(&want, SIGUSR1);
  sigaddset(&want, SIGTERM);
  pthread_sigmask(SIG_BLOCK, nullptr, &before);
  CHECK(!sigismember(&before, SIGUSR1));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_t t;
  sigemptyset(&g_seen);
  CHECK_EQ(glibc_compat::create_masked(pthread_create, &t, &attr, &want, report_mask, nullptr), 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  CHECK(sigismember(&g_seen, SIGUSR1) && sigismember(&g_seen, SIGTERM) && !sigismember(&g_seen, SIGINT));
  pthread_sigmask(SIG_BLOCK, nullptr, &after);
  CHECK(!sigismember(&after, SIGUSR1) && !sigismember(&after, SIGTERM));
}

TEST(create_masked_before_and_after_init) {
  create_with_mask_once();  // the fallback, as on glibc 2.31
  glibc_compat::init();
  create_with_mask_once();
}

}  // namespace
