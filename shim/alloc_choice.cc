// alloc_choice: the decision and the next definitions; see alloc_choice.h.
// Runs inside the first malloc of the image, so it allocates only from the
// bootstrap arena and reads the environment without libc's help where
// libc may not have set it up yet.
#include "alloc_choice.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arch.h"
#include "config.h"
#include "image.h"
#include "only.h"
#include "sys.h"

extern char** environ;
extern "C" const char* malloc_conf;
extern "C" const char profshim_conf_limited[];

namespace alloc_choice {
namespace detail {
int g_mode = kUndecided;
Next g_next;
// What the loader's symbol lookups and the configuration parser allocate
// while the choice is made: a few KiB. Never freed, never reused.
alignas(64) char g_arena[256 << 10];
}  // namespace detail
using detail::g_arena;

namespace {

size_t g_used;  // bytes handed out, under g_lock
int g_lock;     // a spin lock: the first call may race on several threads
int g_deciding;  // set while this image looks up the next definitions

// /proc/self/environ, when libc has no environment yet (a malloc from the
// loader before libc's own initialisation).
char g_env_text[64 << 10];
size_t g_env_len;

void lock() {
  while (__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE)) arch::relax();
}
void unlock() { __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE); }

bool read_proc_environ() {
  int fd = int(syscall(SYS_openat, AT_FDCWD, "/proc/self/environ", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  size_t n = 0;
  for (;;) {
    long r = syscall(SYS_read, fd, g_env_text + n, sizeof g_env_text - 1 - n);
    if (r <= 0) break;
    n += size_t(r);
    if (n == sizeof g_env_text - 1) break;
  }
  syscall(SYS_close, fd);
  g_env_text[n] = 0;
  g_env_len = n;
  return true;
}

const char* env_get(const char* name) {
  size_t len = strlen(name);
  if (environ) {
    for (char** e = environ; *e; ++e)
      if (strncmp(*e, name, len) == 0 && (*e)[len] == '=') return *e + len + 1;
    return nullptr;
  }
  for (size_t i = 0; i < g_env_len; i += strlen(g_env_text + i) + 1)
    if (strncmp(g_env_text + i, name, len) == 0 && g_env_text[i + len] == '=') return g_env_text + i + len + 1;
  return nullptr;
}

// The same reading of the environment as the shim's setup: jemalloc only
// if that setup will start the heap profile. A malformed variable makes
// setup fail and the image inert, so it gets the next allocator too.
bool heap_profiled() {
  if (!environ && !read_proc_environ()) return false;  // nothing to go by: as if not loaded
  config::Config c;
  std::string err = config::parse(env_get, &c);
  // An image exec'd under a seccomp filter stays inert (setup.cc): glibc's.
  return err.empty() && c.active && c.heap_sample != 0 && !image::marker_sandboxed(env_get("PROFSHIM_IMAGE")) &&
         only::selected(c);
}

template <typename F>
void find(F* slot, const char* name) {
  *slot = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

// Only names every glibc since 2.26 defines: a lookup that fails leaves an
// error that dlerror() would translate, taking the locale lock, and the
// first malloc may come from inside newlocale() (curl's libp11-kit
// constructor), which holds it: curl and wget hung inert.
void resolve_next() {
  Next& n = detail::g_next;
  find(&n.malloc, "malloc");
  find(&n.calloc, "calloc");
  find(&n.realloc, "realloc");
  find(&n.free, "free");
  find(&n.posix_memalign, "posix_memalign");
  find(&n.aligned_alloc, "aligned_alloc");
  find(&n.memalign, "memalign");
  find(&n.valloc, "valloc");
  find(&n.pvalloc, "pvalloc");
  find(&n.reallocarray, "reallocarray");
  find(&n.malloc_usable_size, "malloc_usable_size");
  find(&n.mallinfo, "mallinfo");
  find(&n.malloc_trim, "malloc_trim");
  find(&n.malloc_stats, "malloc_stats");
  find(&n.malloc_info, "malloc_info");
  find(&n.libc_malloc, "__libc_malloc");
  find(&n.libc_calloc, "__libc_calloc");
  find(&n.libc_realloc, "__libc_realloc");
  find(&n.libc_free, "__libc_free");
  find(&n.libc_memalign, "__libc_memalign");
  find(&n.libc_valloc, "__libc_valloc");
  find(&n.libc_pvalloc, "__libc_pvalloc");
  if (!n.libc_malloc) n.libc_malloc = n.malloc;
  if (!n.libc_calloc) n.libc_calloc = n.calloc;
  if (!n.libc_realloc) n.libc_realloc = n.realloc;
  if (!n.libc_free) n.libc_free = n.free;
  if (!n.libc_memalign) n.libc_memalign = n.memalign;
  if (!n.libc_valloc) n.libc_valloc = n.valloc;
  if (!n.libc_pvalloc) n.libc_pvalloc = n.pvalloc;
}

int g_optional_done;  // the names glibc may lack were looked up

}  // namespace

Mode decide() {
  // A call made while the choice is being made (the lookup's and the
  // parser's own allocations, or another thread's) is served from the
  // bootstrap arena.
  if (__atomic_load_n(&g_deciding, __ATOMIC_ACQUIRE)) return kUndecided;
  lock();
  int m = __atomic_load_n(&detail::g_mode, __ATOMIC_ACQUIRE);
  if (m != kUndecided) {
    unlock();
    return Mode(m);
  }
  __atomic_store_n(&g_deciding, 1, __ATOMIC_RELEASE);
  unlock();
  bool je = heap_profiled();
  if (!je) resolve_next();
  if (!je && !detail::g_next.malloc) je = true;  // no allocator after ours: jemalloc must serve
  if (je && sys::memory_limited()) malloc_conf = profshim_conf_limited;  // read at jemalloc's boot, which is next
  __atomic_store_n(&detail::g_mode, je ? kJemalloc : kNext, __ATOMIC_RELEASE);
  __atomic_store_n(&g_deciding, 0, __ATOMIC_RELEASE);
  return je ? kJemalloc : kNext;
}

// No caller waits for another: one that finds the names not looked up yet
// looks them up itself (the same answers; a thread inside a dlopen's
// constructor, holding the loader's lock, must not wait for one in dlsym).
const Next& optional() {
  if (__atomic_load_n(&g_optional_done, __ATOMIC_ACQUIRE)) return detail::g_next;
  Next& n = detail::g_next;
  find(&n.mallocx, "mallocx");
  find(&n.rallocx, "rallocx");
  find(&n.xallocx, "xallocx");
  find(&n.sallocx, "sallocx");
  find(&n.dallocx, "dallocx");
  find(&n.sdallocx, "sdallocx");
  find(&n.nallocx, "nallocx");
  find(&n.mallctl, "mallctl");
  find(&n.mallctlnametomib, "mallctlnametomib");
  find(&n.mallctlbymib, "mallctlbymib");
  find(&n.malloc_stats_print, "malloc_stats_print");
  find(&n.mallinfo2, "mallinfo2");
  find(&n.tc_property, "MallocExtension_GetNumericProperty");
  void* cf = dlsym(RTLD_NEXT, "cfree");
  n.cfree = cf ? reinterpret_cast<void (*)(void*)>(cf) : n.free;
  // The names glibc lacks left an error for dlerror(): a program that
  // reads it without a dlsym of its own first would see ours.
  dlerror();
  __atomic_store_n(&g_optional_done, 1, __ATOMIC_RELEASE);
  return detail::g_next;
}

// Each block is preceded by its size, so realloc and malloc_usable_size
// can answer for it.
void* bootstrap_alloc(size_t n, size_t align) {
  if (align < 16) align = 16;
  lock();
  uintptr_t base = reinterpret_cast<uintptr_t>(g_arena);
  uintptr_t at = (base + g_used + sizeof(size_t) + align - 1) & ~uintptr_t(align - 1);
  void* p = nullptr;
  if (n <= sizeof g_arena && at + n <= base + sizeof g_arena) {
    reinterpret_cast<size_t*>(at)[-1] = n;
    g_used = at + n - base;
    p = reinterpret_cast<void*>(at);
  }
  unlock();
  return p;
}

size_t bootstrap_size(const void* p) { return reinterpret_cast<const size_t*>(p)[-1]; }

}  // namespace alloc_choice
