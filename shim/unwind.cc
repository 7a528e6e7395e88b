// unwind: libunwind through dlopen, and the shim's stack walks; see unwind.h.
#include "unwind.h"

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <ucontext.h>

#include "wrappers.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

extern "C" void* __tls_get_addr(void*);  // the dynamic loader's: a probe for its address range

namespace unwind {
namespace {

// libunwind is not linked: Debian's static libunwind is not PIC, and the
// shared one's _Unwind_Backtrace would win over libgcc's for every object in
// the process (jemalloc's heap sampling measured 4x slower through it).
struct Api {
  int (*init_local)(unw_cursor_t*, unw_context_t*);
  int (*init_local2)(unw_cursor_t*, unw_context_t*, int);
  int (*getcontext)(unw_context_t*);
  int (*step)(unw_cursor_t*);
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*);
  int (*is_signal_frame)(unw_cursor_t*);
  int (*set_caching_policy)(unw_addr_space_t, unw_caching_policy_t);
  unw_addr_space_t* local_as;
};
Api u;
bool g_loaded;

struct Range { uint64_t lo, hi; };
constexpr int kMaxRanges = 16;
Range g_unsafe[kMaxRanges];
int g_nunsafe;

template <typename T>
bool bind(void* h, const char* name, T* out) {
  *out = reinterpret_cast<T>(dlsym(h, name));
  return *out != nullptr;
}

uint64_t interrupted_pc(void* uc) {
  return uint64_t(static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP]);
}

// Collects the executable segments of the objects that contain the probes.
int collect_ranges(struct dl_phdr_info* info, size_t, void* arg) {
  const uint64_t* probes = static_cast<const uint64_t*>(arg);
  bool hit = false;
  for (int i = 0; i < info->dlpi_phnum && !hit; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    uint64_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (ph.p_type == PT_LOAD && ((probes[0] >= lo && probes[0] < hi) || (probes[1] >= lo && probes[1] < hi)))
      hit = true;
  }
  for (int i = 0; hit && i < info->dlpi_phnum && g_nunsafe < kMaxRanges; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    uint64_t lo = info->dlpi_addr + ph.p_vaddr;
    g_unsafe[g_nunsafe++] = {lo, lo + ph.p_memsz};
  }
  return 0;
}

}  // namespace

bool load(std::string* err) {
  if (g_loaded) return true;
  void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *err = std::string("cannot load libunwind.so.8: ") + dlerror();
    return false;
  }
  if (!bind(h, "_ULx86_64_init_local", &u.init_local) || !bind(h, "_ULx86_64_init_local2", &u.init_local2) ||
      !bind(h, "_Ux86_64_getcontext", &u.getcontext) || !bind(h, "_ULx86_64_step", &u.step) ||
      !bind(h, "_ULx86_64_get_reg", &u.get_reg) || !bind(h, "_ULx86_64_is_signal_frame", &u.is_signal_frame) ||
      !bind(h, "_ULx86_64_set_caching_policy", &u.set_caching_policy) ||
      !bind(h, "_ULx86_64_local_addr_space", &u.local_as)) {
    *err = "libunwind.so.8 lacks the local unwinding API";
    return false;
  }
  // No cache at all: libunwind's caches take a mutex (its per-thread one a
  // lazily malloc'd __thread block besides), and the shim's signal
  // interrupts any code, libunwind's own included (the program may use it,
  // or the shim may be unwinding on that thread already): a handler that
  // meets that mutex held deadlocks. Uncached, a step takes no lock of
  // libunwind's; dl_iterate_phdr's is recursive.
  u.set_caching_policy(*u.local_as, UNW_CACHE_NONE);
  g_loaded = true;
  return true;
}

bool loaded() { return g_loaded; }

int from_signal(void* uc, uint64_t* frames, int max) {
  unw_cursor_t cur;
  int n = 0;
  if (g_loaded && u.init_local2(&cur, static_cast<unw_context_t*>(uc), UNW_INIT_SIGNAL_FRAME) >= 0) {
    do {
      unw_word_t ip = 0;
      if (u.get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0) break;
      // libunwind's is_signal_frame() says whether the step that led here
      // went through a signal frame (x86_64: the FDE of the frame it stepped
      // from had the 'S' augmentation): it is true at the frame a signal
      // interrupted, not at the trampoline (__restore_rt) before it. So here
      // the frame recorded last is the trampoline -- not the program's
      // frame: it goes, unless it is the leaf (the signal came while it
      // ran) -- and this one is an interrupted instruction, not a call's
      // return.
      bool interrupted = n == 0 || u.is_signal_frame(&cur) > 0;
      if (n > 1 && interrupted) --n;
      frames[n++] = interrupted ? (uint64_t(ip) | kExact) : uint64_t(ip);
    } while (n < max && u.step(&cur) > 0);
  }
  if (n == 0) frames[n++] = interrupted_pc(uc) | kExact;  // keep the sample: the instruction at least
  return n;
}

void note_unsafe_code() {
  uint64_t probes[2] = {reinterpret_cast<uint64_t>(&note_unsafe_code),
                        reinterpret_cast<uint64_t>(&__tls_get_addr)};
  g_nunsafe = 0;
  dl_iterate_phdr(collect_ranges, probes);
}

bool in_unsafe_code(uint64_t pc) {
  // The frames the shim puts under main and every thread's start routine
  // hold nothing: every stack of the program passes through them.
  if (pc >= wrappers::begin() && pc < wrappers::end()) return false;
  for (int i = 0; i < g_nunsafe; ++i)
    if (pc >= g_unsafe[i].lo && pc < g_unsafe[i].hi) return true;
  return false;
}

bool interrupted_in_unsafe_code(void* uc) {
  uint64_t frames[32];
  int n = from_signal(uc, frames, 32);
  for (int i = 0; i < n; ++i)
    if (in_unsafe_code(pc_of(frames[i]))) return true;
  return false;
}

bool inside_handler_over_unsafe_code() {
  if (!g_loaded) return false;
  unw_context_t ctx;
  unw_cursor_t cur;
  if (u.getcontext(&ctx) != 0 || u.init_local(&cur, &ctx) < 0) return false;
  int after = -1;  // frames seen from the innermost interrupted one on
  for (int depth = 0; depth < 256 && after < 32; ++depth) {
    // True at the frame the signal interrupted (see from_signal): that
    // frame is the first to check, the one most likely inside malloc.
    if (after < 0 && u.is_signal_frame(&cur) > 0) after = 0;
    if (after >= 0) {
      unw_word_t ip = 0;
      if (u.get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0) break;
      if (in_unsafe_code(uint64_t(ip))) return true;
      ++after;
    }
    if (u.step(&cur) <= 0) break;
  }
  return false;
}

}  // namespace unwind
