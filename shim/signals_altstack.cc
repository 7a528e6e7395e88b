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

bool is_shim_altstack(const void* ss_sp) { return ss_sp && ss_sp == t_shim_alt; }

int raw_sigaltstack(const stack_t* ss, stack_t* old) { return int(syscall(SYS_sigaltstack, ss, old)); }

// Enough for the fatal handler until it moves to a stack of its own
// (lifecycle's fatal stop); touched only when used. Left in cores, unlike
// the shim's other memory (sys.h, dont_dump): a crash's frames are on it.
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
  // Only the shim's own, and only here, at the thread's end: unmapped any
  // earlier (when the program replaced it), the kernel could put it back at
  // a handler's return from the context it saved, and the program's next
  // mmap could get its address.
  if (!stack || stack != t_shim_alt) return;
  stack_t cur;
  if (raw_sigaltstack(nullptr, &cur) != 0) return;
  if (cur.ss_sp == stack && !(cur.ss_flags & SS_DISABLE)) {
    if (cur.ss_flags & SS_ONSTACK) return;  // in use: left mapped
    stack_t off = {nullptr, SS_DISABLE, 0};
    raw_sigaltstack(&off, nullptr);
  }
  munmap(stack, kAltStack);
  t_shim_alt = nullptr;
}

int on_sigaltstack(const stack_t* ss, stack_t* old) {
  stack_t local;
  stack_t* out = old ? old : &local;  // the kernel checks the program's pointer
  int rc = raw_sigaltstack(ss, out);
  if (rc != 0) return rc;
  // The shim's stack is not the program's: it reads what it would read
  // without the shim, no alternate stack (even while a handler runs on it).
  if (old && t_shim_alt && out->ss_sp == t_shim_alt && !(out->ss_flags & SS_DISABLE))
    *old = stack_t{nullptr, SS_DISABLE, 0};
  return 0;
}

}  // namespace signals
