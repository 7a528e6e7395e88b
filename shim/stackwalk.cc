// stackwalk: the shim's stack walks with libgcc's unwinder; see stackwalk.h.
#include "stackwalk.h"

#include <link.h>
#include <sys/auxv.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <ucontext.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unwind.h>

#include "arch.h"
#include "glibc_compat.h"
#include "go_runtime.h"
#include "go_stacks.h"
#include "go_unwind.h"
#include "stack.h"
#include "stackwalk_guard.h"
#include "wrappers.h"
#include "signals.h"

extern "C" void* __tls_get_addr(void*);  // the dynamic loader's: a probe for its address range
// The signal masks' and waits' wrappers (hooks_signal.cc): a fatal signal
// comes there to a thread that holds nothing.
extern "C" char __start_profshim_sigcall[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_profshim_sigcall[] __attribute__((weak, visibility("hidden")));

namespace stackwalk {
namespace {

struct Range { uint64_t lo, hi; };
// Stack the unwinder wants below the handler: its contexts and frame state
// (~4 KiB), with margin.
constexpr uintptr_t kUnwindRoom = 16 << 10;
// The System V ABI's red zone below a function's stack pointer, and the
// frames between a handler's switch to another stack and its walk there.
constexpr uintptr_t kRedZone = 128;
constexpr uintptr_t kSwitchedFrames = 4 << 10;
extern "C" void* __libc_stack_end;  // the dynamic loader's: where _start found its stack

__thread uintptr_t t_stack_lo;  // the thread's usable stack [lo, hi), 0 if unknown
__thread uintptr_t t_stack_hi;
__thread Bounds t_shim_stack;   // a stack of the shim's the thread runs on now (stack.cc)

bool on_alt(uintptr_t sp, const stack_t& alt) {
  uintptr_t lo = reinterpret_cast<uintptr_t>(alt.ss_sp);
  return alt.ss_size && sp > lo && sp < lo + alt.ss_size;
}

// Bytes usable below sp, on a stack whose bounds the shim knows: the
// thread's own, one of the shim's, or the alternate stack alt (as the
// kernel recorded it in a signal's context, or as sigaltstack reports it).
// 0 on any other: a goroutine's, a coroutine's, a JIT's stack of the
// program's own memory, of a size nothing here can tell.
// The alternate stack first: a program may carve it out of its thread's.
uintptr_t room_below(uintptr_t sp, const stack_t* alt) {
  if (alt && on_alt(sp, *alt)) return sp - reinterpret_cast<uintptr_t>(alt->ss_sp);
  if (sp > t_stack_lo && sp < t_stack_hi) return sp - t_stack_lo;
  if (sp > t_shim_stack.lo && sp < t_shim_stack.hi) return sp - t_shim_stack.lo;
  return 0;
}

inline __attribute__((always_inline)) uintptr_t sp_here() {
  return reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
}

uint64_t interrupted_pc(void* uc) {
  return arch::pc(uc);
}

// The executable segments of the shim, the dynamic loader and libc: the
// shim's and the loader's are the unsafe code, the loader's and libc's what
// a stop's watchdog may not leave in the middle of (holds_program_locks).
struct Object {
  uint64_t probe;
  Range ranges[4];
  int n;
};
enum { kShim, kLoader, kLibc, kObjects };
Object g_objects[kObjects];

// Collects the executable segments of the objects that contain the probes.
int collect_ranges(struct dl_phdr_info* info, size_t, void*) {
  for (Object& o : g_objects) {
    bool hit = false;
    for (int i = 0; i < info->dlpi_phnum && !hit; ++i) {
      const ElfW(Phdr)& ph = info->dlpi_phdr[i];
      uint64_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
      hit = ph.p_type == PT_LOAD && o.probe >= lo && o.probe < hi;
    }
    for (int i = 0; hit && i < info->dlpi_phnum && o.n < 4; ++i) {
      const ElfW(Phdr)& ph = info->dlpi_phdr[i];
      if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
      uint64_t lo = info->dlpi_addr + ph.p_vaddr;
      o.ranges[o.n++] = {lo, lo + ph.p_memsz};
    }
  }
  return 0;
}

bool in_sigcall(uint64_t pc) {
  return pc >= uint64_t(__start_profshim_sigcall) && pc < uint64_t(__stop_profshim_sigcall);
}

bool in(int object, uint64_t pc) {
  const Object& o = g_objects[object];
  for (int i = 0; i < o.n; ++i)
    if (pc >= o.ranges[i].lo && pc < o.ranges[i].hi) return true;
  return false;
}

// One walk from the caller's frame outwards. Frames up to the first one the
// unwinder reached through a signal frame (ip_before_insn: an interrupted
// instruction, not a call's return) are the handler's own and are skipped;
// from there on every frame is kept, a later signal trampoline dropped and
// the frame it interrupted marked kExact. A kept frame must look like one
// (stackwalk_guard.h): its address follows a call, and its stack pointer
// lies above its callee's and, where the callee's was on this thread's known
// stack, on it too; the walk ends (cut) at the first that does not, before
// the unwinder reads that frame's saved registers.
struct Walk {
  uint64_t* frames;
  int max, n;
  bool started, cut;
  uintptr_t sp;  // the stack pointer of the previous kept frame, 0 for none
  uint64_t missing;  // the return address it ended at for want of unwind information, 0 for none
};

bool on_thread_stack(uintptr_t sp) { return t_stack_hi && sp >= t_stack_lo && sp < t_stack_hi; }

bool plausible(const Walk& w, struct _Unwind_Context* ctx, uint64_t ip, uintptr_t sp) {
  if (w.sp && (sp <= w.sp || (on_thread_stack(w.sp) && sp > t_stack_hi))) return false;
  return after_call(ip, uint64_t(_Unwind_GetRegionStart(ctx)));
}

_Unwind_Reason_Code step(struct _Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<Walk*>(arg);
  int before = 0;
  uint64_t ip = uint64_t(_Unwind_GetIPInfo(ctx, &before));
  uintptr_t sp = uintptr_t(_Unwind_GetCFA(ctx));
  if (ip == 0) return _URC_END_OF_STACK;
  if (!before) {
    if (w->started) {
      if (!plausible(*w, ctx, ip, sp)) {
        w->cut = true;
        return _URC_END_OF_STACK;
      }
      w->frames[w->n++] = ip;
    }
  } else {
    // The frame just kept was the trampoline of this nested signal.
    if (w->started && w->n > 0) --w->n;
    w->started = true;
    w->frames[w->n++] = ip | kExact;
  }
  // Across a signal frame the stack may be another (an alternate stack).
  w->sp = w->started ? sp : 0;
#if defined(__aarch64__)
  // There the signal frame's CFA is the kernel's frame record inside the
  // signal frame (the vDSO's CFI; libgcc's fallback: the sigcontext), on
  // the handler's stack, not the interrupted stack pointer: the next frame
  // is not compared with it.
  if (before) w->sp = 0;
#endif
  return w->n < w->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

// The walk, ended early where a frame had no unwind information.
void walk(Walk* w) {
  if (!guarded_backtrace(step, w) && w->started) w->cut = true, w->missing = missing_unwind_info() + 1;
}

// Code with no unwind information (generated code, hand-written assembly)
// ends the unwinder's walk at its frame. Past it, the frame-pointer chain
// from the interrupted context, as far as it stays inside this thread's
// known stack (a JIT that keeps frame pointers, as most do, is walked).
int frame_pointer_walk(void* uc, uint64_t* frames, int n, int max) {
  uintptr_t sp = arch::sp(uc), fp = arch::fp(uc);
  if (!t_stack_hi || sp < t_stack_lo || sp >= t_stack_hi) return n;
  while (n < max && fp >= sp && fp % 8 == 0 && fp + 16 <= t_stack_hi) {
    const uintptr_t* frame = reinterpret_cast<const uintptr_t*>(fp);
    uintptr_t ret = frame[1], next = frame[0];
    if (ret < 4096) break;
    frames[n++] = ret;
    if (next <= fp) break;  // the chain must go up the stack
    sp = fp;
    fp = next;
  }
  return n;
}

// Go code (no unwind information) interrupted on its goroutine's stack or
// its thread's: walked by Go's own tables, inside that stack's bounds.
int go_walk(void* uc, uint64_t* frames, int max) {
  uintptr_t sp = arch::sp(uc), lo = t_stack_lo, hi = t_stack_hi;
  if ((!hi || sp < lo || sp >= hi) && !go_runtime::goroutine_stack(sp, &lo, &hi)) return 1;
  return go_stacks::walk(arch::pc(uc), sp, lo, hi, frames, 1, max);
}

_Unwind_Reason_Code count(struct _Unwind_Context*, void* arg) {
  ++*static_cast<int*>(arg);
  return _URC_NO_REASON;
}

}  // namespace

// The alternate stack's bounds come from the context, where the kernel
// records the thread's setting at delivery (its ss_flags say nothing of
// where the interrupted code ran: on current kernels they are the setting's
// flags, SS_AUTODISARM or 0).
bool cramped(void* uc) {
  return room_below(sp_here(), &static_cast<ucontext_t*>(uc)->uc_stack) < kUnwindRoom;
}

bool on_alt_stack(void* uc) { return on_alt(sp_here(), static_cast<ucontext_t*>(uc)->uc_stack); }

bool elsewhere(void* uc, void (*fn)(void*), void* arg) {
  const ucontext_t* u = static_cast<ucontext_t*>(uc);
  const uintptr_t sp = arch::sp(uc);
  // Only from the alternate stack to a stack the interrupted code was on:
  // anywhere else the handler's own frames may lie below that code's.
  if (!on_alt(sp_here(), u->uc_stack) || on_alt(sp, u->uc_stack)) return false;
  // Below the red zone the ABI lets the interrupted function keep under
  // its stack pointer, where the kernel itself would have put the frame.
  // Every signal but a fault is blocked in the shim's handlers: none can
  // land on the alternate stack's top, where this handler's frames are.
  const uintptr_t top = (sp - kRedZone) & ~uintptr_t(15);
  if (sp < kRedZone || room_below(top, nullptr) < kUnwindRoom + kSwitchedFrames) return false;
  stack::call_on(reinterpret_cast<void*>(top), fn, arg);
  return true;
}

namespace {
int tls_of_ours(struct dl_phdr_info* info, size_t, void* arg) {
  uint64_t self = reinterpret_cast<uint64_t>(&with_room);
  size_t tls = 0;
  bool ours = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    uint64_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && self >= lo && self < lo + ph.p_memsz) ours = true;
    if (ph.p_type == PT_TLS) tls = ph.p_memsz + ph.p_align;
  }
  if (ours) *static_cast<size_t*>(arg) = tls;
  return ours;
}
}  // namespace

const pthread_attr_t* with_room(const pthread_attr_t* attr, pthread_attr_t* copy, bool sampled) {
  static size_t tls = [] {
    size_t n = 0;
    dl_iterate_phdr(tls_of_ours, &n);
    return n;
  }();
  void* lo = nullptr;
  size_t set = 0, size = 0;
  // pthread_attr_getstack gives the size as set, 0 when it was not (the
  // default then applies); pthread_attr_getstacksize gives the size the
  // thread will get. Taken from the first, an unset size became the room
  // alone: on a machine whose signal frame is large (AMX, 11,952
  // bytes) that passed glibc's minimum, and such threads got ~16 KiB
  // stacks (Chromium's thread pool overflowed them).
  if (!attr || pthread_attr_getstack(attr, &lo, &set) != 0 || pthread_attr_getstacksize(attr, &size) != 0 ||
      size >= (1u << 20))
    return attr;
  // A stack of the program's own memory: glibc reports its lowest address;
  // with none set it reports 0 (newer glibc) or 0 - size (2.36).
  if (lo && reinterpret_cast<uintptr_t>(lo) + set != 0) return attr;
  // The signal frame (the kernel's minimum for this machine) and the
  // handler's few frames.
  size_t signal_room = sampled ? getauxval(AT_MINSIGSTKSZ) + (2 << 10) : 0;
  if (sampled && signal_room < (6 << 10)) signal_room = 6 << 10;
  // Only the size differs; pthread_attr_setstacksize writes that field
  // alone, so a bitwise copy keeps the rest (and points at the same cpuset).
  __builtin_memcpy(copy, attr, sizeof *copy);
  if (pthread_attr_setstacksize(copy, size + tls + signal_room) != 0) return attr;
  return copy;
}

void prime() {
  // The unwinder's one-time set-up (its register table, under
  // pthread_once) and its lazily bound calls happen here, not first inside
  // a handler.
  int n = 0;
  _Unwind_Backtrace(count, &n);
  note_thread_stack();
}

void note_thread_stack() {
  // The main thread: glibc's pthread_getattr_np reads /proc/self/maps for
  // it (~70 us of every image's setup). Its frames all lie below
  // __libc_stack_end, and the stack may grow to RLIMIT_STACK below the top
  // of its mapping, which holds at most a quarter of the limit above
  // __libc_stack_end (the kernel's bound on argv and environment) and a
  // few pages of auxv: the bounds taken are inside the true ones.
  struct rlimit rl;
  const uintptr_t top = reinterpret_cast<uintptr_t>(__libc_stack_end);
  if (getpid() == pid_t(syscall(SYS_gettid)) && getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur >= (size_t(1) << 20) && rl.rlim_cur < top / 2) {
    t_stack_hi = top;
    t_stack_lo = top - (rl.rlim_cur - rl.rlim_cur / 4) + (uintptr_t(64) << 10);
    return;
  }
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void* addr = nullptr;
  size_t size = 0, guard = 0;
  if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
    pthread_attr_getguardsize(&attr, &guard);
    t_stack_lo = reinterpret_cast<uintptr_t>(addr) + guard;
    t_stack_hi = reinterpret_cast<uintptr_t>(addr) + size;
  }
  pthread_attr_destroy(&attr);
}

ThreadStack stack_of(const pthread_attr_t* attr) {
  ThreadStack st = {0, 0};
  pthread_attr_t dflt;
  if (!attr && pthread_getattr_default_np(&dflt) != 0) return st;
  const pthread_attr_t* a = attr ? attr : &dflt;
  void* lo = nullptr;
  size_t size = 0;
  // As with_room reads it: no stack of the program's reads 0 or 0 - size.
  if (pthread_attr_getstack(a, &lo, &size) == 0 && lo && reinterpret_cast<uintptr_t>(lo) + size != 0)
    st.lo = reinterpret_cast<uintptr_t>(lo);
  if (pthread_attr_getstacksize(a, &size) == 0) st.size = size;
  if (!attr) pthread_attr_destroy(&dflt);
  return st;
}

void note_new_thread_stack(const ThreadStack& st) {
  if (st.lo) {
    t_stack_lo = st.lo, t_stack_hi = st.lo + st.size;
    return;
  }
  // glibc maps the size asked plus the guard below it (2.27 on) and puts the
  // thread's descriptor, which pthread_self() points at, at the top with
  // static TLS under it: the usable stack ends the size below the top, and
  // the top is within 8 KiB above the descriptor (its size and alignment).
  const uintptr_t self = reinterpret_cast<uintptr_t>(pthread_self()), kAboveSelf = 8 << 10;
  if (st.size <= kAboveSelf + kUnwindRoom || self < st.size) return;
  t_stack_hi = self;
  t_stack_lo = self + kAboveSelf - st.size;
}

namespace {
void unwind_there(void* w) { walk(static_cast<Walk*>(w)); }
}  // namespace

bool thread_stack_noted() { return t_stack_hi != 0; }

bool thread_stack(uintptr_t* lo, uintptr_t* hi) {
  *lo = t_stack_lo, *hi = t_stack_hi;
  return t_stack_hi != 0;
}

int from_signal(void* uc, uint64_t* frames, int max, bool* cut) {
  Walk w = {frames, max, 0, false, false, 0, 0};
  bool walked = !cramped(uc);
  if (walked)
    walk(&w);
  else
    walked = elsewhere(uc, unwind_there, &w);
  // Never got past the handler (no unwind information on the way, or no
  // room): the interrupted instruction at least.
  if (!w.started || w.n == 0 || pc_of(frames[0]) != interrupted_pc(uc)) {
    frames[0] = interrupted_pc(uc) | kExact;
    if (!w.started || w.n == 0) w.n = 1;
  }
  // Past code with no unwind information, frame pointers, reading the
  // interrupted stack only, inside its known bounds; not past a frame the
  // walk stopped at for want of trust.
  if (w.n == 1 && walked && go_unwind::in_go(interrupted_pc(uc))) {
    w.n = go_walk(uc, frames, max);
    w.cut = false;  // the unwinder's stop at Go code was for want of tables, not of trust
  } else if (w.n == 1 && walked && !w.cut) {
    w.n = frame_pointer_walk(uc, frames, 1, max);
  } else if (walked && w.cut) {
    // C called from Go (cgo): on to its goroutine.
    const int n = w.missing ? go_stacks::after_c(w.missing, frames, w.n, max) : w.n;
    if (n > w.n) w.n = n, w.cut = false;
  }
  if (cut) *cut = w.cut;
  return w.n;
}

int here(uint64_t* frames, int max) {
  Holding unwinder;  // the loader's lock, for a library the objects' table lacks (glibc_compat.h)
  Walk w = {frames, max, 0, true, false, 0, 0};
  walk(&w);
  // C called from Go (an allocation in cgo code): on to its goroutine.
  if (w.missing) w.n = go_stacks::after_c(w.missing, frames, w.n, max);
  return w.n;
}

bool room_here() {
  const uintptr_t sp = sp_here();
  if (room_below(sp, nullptr) >= kUnwindRoom) return true;
  // Not on a stack the shim knows with room: maybe the alternate signal
  // stack (a program's handler), the one other stack with bounds to go by.
  // Not a stack the program switched to (a coroutine's or fiber's,
  // makecontext, of any size: a 16 KiB one with 14 KiB in use overflowed).
  stack_t ss;
  return signals::raw_sigaltstack(nullptr, &ss) == 0 && (ss.ss_flags & SS_ONSTACK) &&
         room_below(sp, &ss) >= kUnwindRoom;
}

Bounds use_stack(Bounds b) {
  Bounds was = t_shim_stack;
  t_shim_stack = b;
  return was;
}

void note_unsafe_code() {
  g_objects[kShim] = {reinterpret_cast<uint64_t>(&note_unsafe_code), {}, 0};
  g_objects[kLoader] = {reinterpret_cast<uint64_t>(&__tls_get_addr), {}, 0};
  g_objects[kLibc] = {reinterpret_cast<uint64_t>(&strtol), {}, 0};  // one the shim does not interpose
  dl_iterate_phdr(collect_ranges, nullptr);
}

bool holds_program_locks(void* uc) {
  uint64_t frames[32];
  int n = from_signal(uc, frames, 32);
  for (int i = 0; i < n; ++i) {
    uint64_t pc = pc_of(frames[i]);
    if (in_unsafe_code(pc) || in(kLibc, pc)) return true;
    if (in(kShim, pc)) return false;  // the stop's own code, which called what is below
  }
  return true;  // never back in the shim's code: nothing to go by
}

bool in_unsafe_code(uint64_t pc) {
  return wrappers::in_alloc(pc) || in(kLoader, pc);
}

bool may_park_here() {
  // From the first wrapper of a blocking call (section profshim_wait) out,
  // no frame may be inside code whose locks the stop needs: a program
  // thread that calls read() inside a dl_iterate_phdr callback holds the
  // loader's lock; jemalloc's own lock calls come from inside the shim.
  if (holding() || glibc_compat::holds_loader_lock()) return false;
  uint64_t frames[32];
  int n = here(frames, 32), i = 0;
  while (i < n && !wrappers::in_wait(pc_of(frames[i]))) ++i;
  if (i == n) return false;  // not called from a wrapper: nothing to go by
  for (++i; i < n; ++i)
    if (in_unsafe_code(pc_of(frames[i]))) return false;
  return true;
}

bool may_park_leaving_alloc() {
  // The allocator's frames are this thread's own, about to return; beyond
  // them, as at a wrapper, no frame may hold the loader's lock or be inside
  // another allocator call.
  if (holding() || glibc_compat::holds_loader_lock()) return false;
  uint64_t frames[32];
  int n = here(frames, 32), i = 0;
  if (n == 32) return false;  // deeper than the walk: the frames past it unseen
  while (i < n && !wrappers::in_alloc(pc_of(frames[i]))) ++i;
  if (i == n) return false;
  while (i < n && wrappers::in_alloc(pc_of(frames[i]))) ++i;
  for (; i < n; ++i)
    if (in_unsafe_code(pc_of(frames[i]))) return false;
  return true;
}

bool interrupted_in_unsafe_code(void* uc, bool from_sigwait) {
  if (holding() || glibc_compat::holds_loader_lock()) return true;
  if (t_left_alloc) return false;
  uint64_t frames[32];
  int n = from_signal(uc, frames, 32);
  int i = 0;
  if (from_sigwait) {
    while (i < n && !in_sigcall(pc_of(frames[i]))) ++i;
    if (i == n) i = 0;  // not found: every frame counts
  }
  for (; i < n; ++i)
    if (in_unsafe_code(pc_of(frames[i]))) return true;
  return false;
}

Context calling_context() {
  uint64_t frames[32];
  Walk w = {frames, 32, 0, false, false, 0, 0};
  walk(&w);
  if (!w.started) return kNotInHandler;
  if (holding() || glibc_compat::holds_loader_lock()) return kHandlerOverUnsafeCode;
  for (int i = 0; i < w.n; ++i)
    if (in_unsafe_code(pc_of(frames[i]))) return kHandlerOverUnsafeCode;
  return kHandler;
}

}  // namespace stackwalk
