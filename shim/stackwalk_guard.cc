// stackwalk_guard: what keeps a walk from reading where no frame is; see
// stackwalk_guard.h.
#include "stackwalk_guard.h"

#include "fde_lookup.h"

namespace stackwalk {
namespace {
// The armed walk's __builtin_setjmp buffer on this thread, null when none:
// initial-exec TLS, read in signal handlers.
__thread void** t_escape;
__thread uint64_t t_missing;  // the address the armed walk found no unwind information for
// The signal trampoline, as the shim's handler saw it: the same for every
// signal in the process (the vDSO's, or the emulator's page), so any
// thread's note will do.
uint64_t g_trampoline;
}  // namespace
}  // namespace stackwalk

// The unwinder's lookup of a frame's unwind information (libgcc_eh's, linked
// in: Makefile's --wrap), done by fde_lookup, which takes no lock (libgcc's
// own, before GCC 12, takes the loader's). With none, libgcc falls back to
// reading the code at that address, looking for a signal trampoline: at a
// return address read from a frame the unwinder got wrong (a sample taken
// while the program's unwinder installs a landing pad's context), that is
// a read of any address at all. In an armed walk, the walk ends there
// instead.
extern "C" __attribute__((visibility("hidden"))) const void* __wrap__Unwind_Find_FDE(void* pc, void* bases) {
  const void* fde = fde_lookup::find(pc, static_cast<fde_lookup::Bases*>(bases));
  // A return address's lookup is of the address less one (a signal frame's:
  // itself): the trampoline, known mapped code, is read as libgcc reads it.
  const uint64_t at = reinterpret_cast<uint64_t>(pc), tramp = __atomic_load_n(&stackwalk::g_trampoline, __ATOMIC_RELAXED);
  if (!fde && stackwalk::t_escape && !(tramp && (at == tramp || at + 1 == tramp))) {
    stackwalk::t_missing = reinterpret_cast<uint64_t>(pc);
    __builtin_longjmp(stackwalk::t_escape, 1);
  }
  return fde;
}

namespace stackwalk {

uint64_t missing_unwind_info() { return t_missing; }

void note_trampoline(const void* ra) {
  __atomic_store_n(&g_trampoline, reinterpret_cast<uint64_t>(ra), __ATOMIC_RELAXED);
}

__attribute__((noinline)) bool guarded_backtrace(_Unwind_Trace_Fn fn, void* arg) {
  void* buf[5];
  void** outer = t_escape;  // a walk this handler interrupted (the wait profile's)
  bool whole = true;
  if (__builtin_setjmp(buf) == 0) {
    t_escape = buf;
    _Unwind_Backtrace(fn, arg);
  } else {
    whole = false;
  }
  t_escape = outer;
  return whole;
}

#if defined(__x86_64__)
namespace {
// rt_sigreturn's trampoline: mov $15,%rax; syscall (glibc's __restore_rt).
const uint8_t kSigreturn[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

// The length of an indirect call (ff /2) from its ModRM byte on, or 0.
int call_length(const uint8_t* op, uint64_t window_end) {
  if (uint64_t(op + 2) > window_end) return 0;
  uint8_t modrm = op[1];
  if (((modrm >> 3) & 7) != 2) return 0;
  int mod = modrm >> 6, rm = modrm & 7, len = 2;
  if (mod == 3) return len;
  if (rm == 4) {
    if (uint64_t(op + 3) > window_end) return 0;
    ++len;
    if (mod == 0 && (op[2] & 7) == 5) len += 4;
  } else if (mod == 0 && rm == 5) {
    len += 4;  // rip-relative
  }
  if (mod == 1) len += 1;
  if (mod == 2) len += 4;
  return len;
}
}  // namespace

bool after_call(uint64_t ip, uint64_t func) {
  // The unwinder found unwind information for ip - 1, from func on: that
  // code, and the page that holds ip - 1, are mapped; nothing else is read.
  const uint64_t page = (ip - 1) & ~uint64_t(4095), hi = page + 4096;
  const uint64_t lo = func && func < ip ? func : page;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(ip);
  if (ip + sizeof kSigreturn <= hi && __builtin_memcmp(p, kSigreturn, sizeof kSigreturn) == 0) return true;
  if (ip - 5 >= lo && p[-5] == 0xe8) return true;
  for (int k = 2; k <= 7; ++k)
    if (ip - k >= lo && p[-k] == 0xff && call_length(p - k, ip) == k) return true;
  return false;
}

#elif defined(__aarch64__)
namespace {
// rt_sigreturn's trampoline: mov x8, #139; svc #0 (the vDSO's
// __kernel_rt_sigreturn).
constexpr uint32_t kMovX8Sigreturn = 0xd2801168, kSvc0 = 0xd4000001;
}  // namespace

bool after_call(uint64_t ip, uint64_t func) {
  // Fixed-size instructions: the one before ip is the call, in the page
  // that holds ip - 1 (mapped: the unwinder found information for it) or
  // at func or after.
  if (ip % 4) return false;
  const uint64_t page = (ip - 1) & ~uint64_t(4095), hi = page + 4096;
  const uint64_t lo = func && func < ip ? func : page;
  const uint32_t* p = reinterpret_cast<const uint32_t*>(ip);
  if (ip + 8 <= hi && p[0] == kMovX8Sigreturn && p[1] == kSvc0) return true;
  if (ip - 4 < lo) return false;
  const uint32_t op = p[-1];
  return (op & 0xfc000000) == 0x94000000      // bl
         || (op & 0xfffffc1f) == 0xd63f0000   // blr
         || (op & 0xfefff800) == 0xd63f0800;  // blraa(z), blrab(z) (pointer authentication)
}
#endif

}  // namespace stackwalk
