// stack: a fresh stack for the stop; see stack.h.
#include "stack.h"

#include <stdint.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "signals.h"
#include "stackwalk.h"

// Switches to `top` (16-byte aligned), calls fn(arg) there, switches back.
// The CFI lets an unwinder (and gdb) walk from the new stack to the old.
extern "C" void profshim_call_on_stack(void* top, void (*fn)(void*), void* arg)
    __attribute__((visibility("hidden")));
#if defined(__x86_64__)
__asm__(R"(
  .text
  .globl profshim_call_on_stack
  .hidden profshim_call_on_stack
  .type profshim_call_on_stack,@function
profshim_call_on_stack:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  movq %rdi, %rsp
  movq %rdx, %rdi
  callq *%rsi
  movq %rbp, %rsp
  popq %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size profshim_call_on_stack, .-profshim_call_on_stack
)");
#elif defined(__aarch64__)
// The frame record (x29, x30) stays on the old stack, x29 pointing at it:
// the same chain a frame-pointer walk and the CFI follow back.
__asm__(R"(
  .text
  .globl profshim_call_on_stack
  .hidden profshim_call_on_stack
  .type profshim_call_on_stack,%function
profshim_call_on_stack:
  .cfi_startproc
  stp x29, x30, [sp, #-16]!
  .cfi_def_cfa_offset 16
  .cfi_offset x29, -16
  .cfi_offset x30, -8
  mov x29, sp
  .cfi_def_cfa_register x29
  mov sp, x0
  mov x0, x2
  blr x1
  mov sp, x29
  .cfi_def_cfa sp, 16
  ldp x29, x30, [sp], #16
  .cfi_def_cfa_offset 0
  .cfi_restore x29
  .cfi_restore x30
  ret
  .cfi_endproc
  .size profshim_call_on_stack, .-profshim_call_on_stack
)");
#else
#error "profshim_call_on_stack: only x86_64 and aarch64 are supported"
#endif

namespace stack {
namespace {

constexpr size_t kNestedAlt = 64 << 10;

struct Call {
  void (*fn)(void*);
  void* arg;
  void* alt;
  stackwalk::Bounds stack;
  uint64_t mask;  // the thread's mask before the switch
};

// Every signal blocked (the kernel keeps SIGKILL and SIGSTOP out): the
// mask before, in the kernel's form. Raw, as the rest of this path.
uint64_t block_all() {
  uint64_t all = ~uint64_t(0), old = 0;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, sizeof(uint64_t));
  return old;
}
void set_mask(uint64_t m) { syscall(SYS_rt_sigprocmask, SIG_SETMASK, &m, nullptr, sizeof(uint64_t)); }

// On the fresh stack: a fault here (in the stop) is delivered on an
// alternate stack of its own inside the mapping, not at the top of the
// thread's, where the frames of the handler that brought us here still
// are. Allowed now: this thread no longer runs on that stack.
//
// Signals are blocked from before the switch until the alternate stack is
// this mapping's, and again from before the old one is put back until the
// switch back: in either window the kernel, seeing the thread off its
// alternate stack, would deliver a signal (the sampler's timer) at that
// stack's top, over the frames of the handler that brought us here, the
// Call among them (a crash's stop read a torn argument and died without a
// line, 2 runs in 100).
void on_fresh(void* p) {
  auto* c = static_cast<Call*>(p);
  stack_t mine = {c->alt, 0, kNestedAlt}, before;
  bool swapped = signals::raw_sigaltstack(&mine, &before) == 0;
  if (swapped) set_mask(c->mask);
  stackwalk::Bounds was = stackwalk::use_stack(c->stack);
  c->fn(c->arg);
  stackwalk::use_stack(was);
  if (swapped) {
    block_all();
    before.ss_flags &= SS_DISABLE;  // SS_ONSTACK is a report, not a setting
    signals::raw_sigaltstack(&before, nullptr);
  }
}

}  // namespace

namespace {
// One stack mapped ahead, for a process under a memory limit (reserve()).
// The stacks are left in cores, unlike the shim's other memory (sys.h,
// dont_dump): a crash's frames may be on them.
std::atomic<void*> g_reserved{nullptr};
size_t g_reserved_total;

size_t total_for(size_t size) { return 4096 + kNestedAlt + 4096 + size; }
}  // namespace

bool reserve(size_t size) {
  void* p = mmap(nullptr, total_for(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  g_reserved_total = total_for(size);
  void* none = nullptr;
  if (!g_reserved.compare_exchange_strong(none, p)) munmap(p, total_for(size));
  return true;
}

bool run_on_fresh(size_t size, void (*fn)(void*), void* arg) {
  const size_t guard = 4096, total = total_for(size);
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void* reserved = nullptr;
  if (base == MAP_FAILED && total == g_reserved_total) base = reserved = g_reserved.exchange(nullptr);
  if (base == MAP_FAILED || !base) return false;
  // [guard][nested alternate stack][guard][stack]: an overflow of either
  // faults instead of writing below it.
  char* b = static_cast<char*>(base);
  mprotect(b, guard, PROT_NONE);
  mprotect(b + guard + kNestedAlt, guard, PROT_NONE);
  // Headroom above the first frame: a callee may read its caller's
  // argument area (glibc's syscall() loads a sixth argument from 8(%rsp),
  // and fn may tail-call it).
  uintptr_t top = (reinterpret_cast<uintptr_t>(b) + total - 256) & ~uintptr_t(15);
  Call c = {fn, arg, b + guard, {reinterpret_cast<uintptr_t>(b) + 2 * guard + kNestedAlt, top}, 0};
  c.mask = block_all();
  profshim_call_on_stack(reinterpret_cast<void*>(top), on_fresh, &c);
  set_mask(c.mask);
  if (reserved)
    g_reserved.store(reserved);
  else
    munmap(base, total);
  return true;
}

void call_on(void* top, void (*fn)(void*), void* arg) { profshim_call_on_stack(top, fn, arg); }

}  // namespace stack
