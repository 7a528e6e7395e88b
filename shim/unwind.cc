// unwind: libunwind through dlopen, and the shim's stack walks; see unwind.h.
#include "unwind.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

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
  unw_accessors_t* (*get_accessors)(unw_addr_space_t);
  unw_addr_space_t* local_as;
};
Api u;
bool g_loaded;

// libunwind (1.6, and its master still) checks that memory is readable
// before it reads it through a pipe it opens at its initialisation: it
// write()s the byte to the pipe and sees EFAULT, and when a read() of the
// pipe fails it closes both descriptors and makes a new pipe. Those are
// numbers the program owns: a program that closes every descriptor (a
// daemon's closefrom(3)) and opens files of its own gets them read from,
// written to (one byte of stack, on the sampler's signal) and closed by the
// next stack walk. So the shim checks readability itself, without a
// descriptor, and closes the pipe libunwind made: the program's first
// open() is fd 3, as without the shim.
int (*g_access_mem)(unw_addr_space_t, unw_word_t, unw_word_t*, int, void*);
uintptr_t g_page = 4096;

// Pages found readable during the current walk (cleared when a walk
// starts: a page may be unmapped between walks). Per thread, so a handler
// on one thread never sees another's; entries are single aligned stores.
constexpr int kGoodPages = 16;
__thread uintptr_t t_good[kGoodPages];
__thread unsigned t_good_next;

void forget_good_pages() {
  for (uintptr_t& p : t_good) p = 0;
}

// Whether the page at p can be read: rt_sigaction() copies the 32-byte
// action from it before it looks at the signal number, so with signal 0 it
// fails with EFAULT for memory that cannot be read and EINVAL otherwise,
// changing nothing either way. No descriptor, no signal, and a system call
// every seccomp profile lets through.
bool page_readable(uintptr_t p) {
  if (p == 0) return false;
  for (uintptr_t g : t_good)
    if (g == p) return true;
  int saved = errno;
  long rc = syscall(SYS_rt_sigaction, 0, reinterpret_cast<void*>(p), nullptr, 8);
  bool ok = rc != 0 && errno != EFAULT;
  errno = saved;
  if (ok) t_good[t_good_next++ % kGoodPages] = p;
  return ok;
}

// The local address space's access_mem in place of libunwind's: the same
// read, after our check where libunwind would have checked (the low bit of
// arg asks for it), and with that bit cleared for libunwind's own.
int checked_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t* val, int write, void* arg) {
  uintptr_t a = reinterpret_cast<uintptr_t>(arg);
  if (!write && (a & 1)) {
    uintptr_t first = uintptr_t(addr) & ~(g_page - 1), last = (uintptr_t(addr) + sizeof *val - 1) & ~(g_page - 1);
    if (!page_readable(first) || (last != first && !page_readable(last))) return -1;
  }
  return g_access_mem(as, addr, val, write, reinterpret_cast<void*>(a & ~uintptr_t(1)));
}

// The two lowest free descriptor numbers: where pipe2() puts a new pipe.
void lowest_free(int out[2]) {
  int n = 0;
  for (int fd = 0; n < 2 && fd < 65536; ++fd)
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) out[n++] = fd;
}

// Closes the pipe libunwind's initialisation made at those numbers, if it
// made one (it did not if the program's own use of libunwind came first:
// then the pipe is the program's libunwind's, and stays).
void close_init_pipe(const int fds[2]) {
  struct stat r, w;
  if (fstat(fds[0], &r) != 0 || fstat(fds[1], &w) != 0) return;
  if (!S_ISFIFO(r.st_mode) || r.st_dev != w.st_dev || r.st_ino != w.st_ino) return;
  if ((fcntl(fds[0], F_GETFL) & O_ACCMODE) != O_RDONLY || (fcntl(fds[1], F_GETFL) & O_ACCMODE) != O_WRONLY) return;
  syscall(SYS_close, fds[0]);
  syscall(SYS_close, fds[1]);
}

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
  int pipe_fds[2] = {-1, -1};
  lowest_free(pipe_fds);
  void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *err = std::string("cannot load libunwind.so.8: ") + dlerror();
    return false;
  }
  if (!bind(h, "_ULx86_64_init_local", &u.init_local) || !bind(h, "_ULx86_64_init_local2", &u.init_local2) ||
      !bind(h, "_Ux86_64_getcontext", &u.getcontext) || !bind(h, "_ULx86_64_step", &u.step) ||
      !bind(h, "_ULx86_64_get_reg", &u.get_reg) || !bind(h, "_ULx86_64_is_signal_frame", &u.is_signal_frame) ||
      !bind(h, "_ULx86_64_set_caching_policy", &u.set_caching_policy) ||
      !bind(h, "_Ux86_64_get_accessors", &u.get_accessors) ||
      !bind(h, "_ULx86_64_local_addr_space", &u.local_as)) {
    *err = "libunwind.so.8 lacks the local unwinding API";
    return false;
  }
  // The first call initialises libunwind, which opens its pipe.
  unw_accessors_t* acc = u.get_accessors(*u.local_as);
  close_init_pipe(pipe_fds);
  if (!acc || !acc->access_mem) {
    *err = "libunwind.so.8 has no local memory accessor";
    return false;
  }
  long page = sysconf(_SC_PAGESIZE);
  if (page > 0) g_page = uintptr_t(page);
  if (acc->access_mem != checked_access_mem) {
    g_access_mem = acc->access_mem;
    acc->access_mem = checked_access_mem;
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
  forget_good_pages();
  if (g_loaded && u.init_local2(&cur, static_cast<unw_context_t*>(uc), UNW_INIT_SIGNAL_FRAME) >= 0) {
    bool exact = true;  // the interrupted instruction itself
    do {
      unw_word_t ip = 0;
      if (u.get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0) break;
      // A trampoline (__restore_rt) is not the program's frame; what it
      // returns to is an interrupted instruction, not a call's return.
      if (n > 0 && u.is_signal_frame(&cur) > 0) {
        exact = true;
        continue;
      }
      frames[n++] = exact ? (uint64_t(ip) | kExact) : uint64_t(ip);
      exact = false;
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
  forget_good_pages();
  if (u.getcontext(&ctx) != 0 || u.init_local(&cur, &ctx) < 0) return false;
  int after = -1;  // frames seen beyond the innermost signal frame
  for (int depth = 0; depth < 256 && after < 32; ++depth) {
    if (after >= 0) {
      unw_word_t ip = 0;
      if (u.get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0) break;
      if (in_unsafe_code(uint64_t(ip))) return true;
      ++after;
    } else if (u.is_signal_frame(&cur) > 0) {
      after = 0;
    }
    if (u.step(&cur) <= 0) break;
  }
  return false;
}

}  // namespace unwind
