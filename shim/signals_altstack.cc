// signals_altstack: the alternate signal stacks the shim gives threads; see
// signals.h ("Alternate signal stacks" in docs/DESIGN.md says who gets one
// and what runs on it).
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "signals.h"

namespace signals {

namespace {
// The alternate stack the shim gave this thread, while it is installed.
__thread void* t_shim_alt;
}  // namespace

int raw_sigaltstack(const stack_t* ss, stack_t* old) { return int(syscall(SYS_sigaltstack, ss, old)); }

// Enough for the fatal handler until it moves to a stack of its own
// (lifecycle's fatal stop); touched only when used.
constexpr size_t kAltStack = 64 << 10;

void* ensure_altstack() {
  stack_t cur;
  if (raw_sigaltstack(nullptr, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return nullptr;
  void* p = mmap(nullptr, kAltStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  stack_t ss = {p, 0, kAltStack};
  if (raw_sigaltstack(&ss, nullptr) != 0) {
    munmap(p, kAltStack);
    return nullptr;
  }
  t_shim_alt = p;
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
  t_shim_alt = p;
}

void release_altstack(void* stack) {
  if (!stack) return;
  stack_t cur;
  // Only if it is still ours and not in use (the program may have set its own).
  if (raw_sigaltstack(nullptr, &cur) == 0 && cur.ss_sp == stack && !(cur.ss_flags & SS_ONSTACK)) {
    stack_t off = {nullptr, SS_DISABLE, 0};
    raw_sigaltstack(&off, nullptr);
    munmap(stack, kAltStack);
    if (t_shim_alt == stack) t_shim_alt = nullptr;
  }
}

int on_sigaltstack(const stack_t* ss, stack_t* old) {
  stack_t was;
  int rc = raw_sigaltstack(ss, &was);
  if (rc != 0) return rc;
  const bool ours = t_shim_alt && was.ss_sp == t_shim_alt && !(was.ss_flags & SS_DISABLE);
  if (old) {
    *old = was;
    // The shim's stack is not the program's: it reads what it would read
    // without the shim, no alternate stack (even while a handler runs on it).
    if (ours) *old = stack_t{nullptr, SS_DISABLE, 0};
  }
  if (ss && ours) {
    // Replaced or switched off by the program: the shim's is let go (it
    // was left mapped before, 64 KiB a thread). Not while on it: the
    // handler running there returns to it.
    if (!(was.ss_flags & SS_ONSTACK)) munmap(t_shim_alt, kAltStack);
    t_shim_alt = nullptr;
  }
  return 0;
}

}  // namespace signals
