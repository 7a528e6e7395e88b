// signals_altstack: the alternate signal stacks the shim gives threads; see
// signals.h ("Alternate signal stacks" in docs/DESIGN.md says who gets one
// and what runs on it).
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "signals.h"

namespace signals {

// Enough for the fatal handler until it moves to a stack of its own
// (lifecycle's fatal stop); touched only when used.
constexpr size_t kAltStack = 64 << 10;

void* ensure_altstack() {
  stack_t cur;
  if (sigaltstack(nullptr, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return nullptr;
  void* p = mmap(nullptr, kAltStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  stack_t ss = {p, 0, kAltStack};
  if (sigaltstack(&ss, nullptr) != 0) {
    munmap(p, kAltStack);
    return nullptr;
  }
  return p;
}

void altstack_on_return(void* uc) {
  stack_t& ss = static_cast<ucontext_t*>(uc)->uc_stack;
  if (!(ss.ss_flags & SS_DISABLE)) return;
  void* p = mmap(nullptr, kAltStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return;
  ss.ss_sp = p;
  ss.ss_flags = 0;
  ss.ss_size = kAltStack;
}

void release_altstack(void* stack) {
  if (!stack) return;
  stack_t cur;
  // Only if it is still ours and not in use (the program may have set its own).
  if (sigaltstack(nullptr, &cur) == 0 && cur.ss_sp == stack && !(cur.ss_flags & SS_ONSTACK)) {
    stack_t off = {nullptr, SS_DISABLE, 0};
    sigaltstack(&off, nullptr);
    munmap(stack, kAltStack);
  }
}

}  // namespace signals
