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

TEST(dl_find_object_outside_every_object) {
  void* page = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(page != MAP_FAILED);
  glibc_compat::FoundObject fo{};
  CHECK_EQ(glibc_compat::dl_find_object(page, &fo), -1);
  munmap(page, 4096);
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
