// sigmask: the program's view of the signals the shim keeps out of the
// kernel's masks; see sigmask.h.
#include "sigmask.h"

#include <pthread.h>
#include <string.h>

#include "real.h"

namespace sigmask {
namespace {

uint64_t g_kept;  // 0 when inert: every wrapper passes straight through
int g_ours;
__thread uint64_t t_view;  // the kept signals the program wants blocked on this thread
__thread int t_internal;
__thread bool t_retry_pending;

uint64_t bit(int sig) { return sig > 0 && sig <= 64 ? uint64_t(1) << (sig - 1) : 0; }

// The kept signals a set names.
uint64_t kept_in(const sigset_t* set) {
  uint64_t out = 0;
  for (uint64_t k = g_kept; k; k &= k - 1) {
    int sig = __builtin_ctzll(k) + 1;
    if (sigismember(set, sig) == 1) out |= bit(sig);
  }
  return out;
}

void to_set(uint64_t bits, sigset_t* set) {
  sigemptyset(set);
  for (; bits; bits &= bits - 1) sigaddset(set, __builtin_ctzll(bits) + 1);
}

uint64_t kernel_blocked_kept() {
  sigset_t cur;
  sigemptyset(&cur);
  return unfiltered(SIG_BLOCK, nullptr, &cur) == 0 ? kept_in(&cur) : 0;
}

void kernel(int how, uint64_t bits) {
  if (!bits) return;
  sigset_t set;
  to_set(bits, &set);
  unfiltered(how, &set, nullptr);
}

}  // namespace

Internal::Internal() { ++t_internal; }
Internal::~Internal() { --t_internal; }
bool internal() { return t_internal > 0; }
ProgramCode::ProgramCode() : saved(t_internal) { t_internal = 0; }
ProgramCode::~ProgramCode() { t_internal = saved; }

int unfiltered(int how, const sigset_t* set, sigset_t* old) {
  return real::pthread_sigmask()(how, set, old);
}

void setup(int ours) {
  g_ours = ours;
  g_kept = bit(ours) | bit(SIGSEGV) | bit(SIGBUS) | bit(SIGFPE) | bit(SIGILL) | bit(SIGTRAP) | bit(SIGSYS);
  t_view = kernel_blocked_kept();
  kernel(SIG_UNBLOCK, t_view);
}

int ours() { return g_ours; }

bool view() { return t_view & bit(g_ours); }

bool view_blocks(int sig) { return t_view & bit(sig); }

void set_view(bool blocked) { t_view = blocked ? (t_view | bit(g_ours)) : (t_view & ~bit(g_ours)); }

uint64_t view_bits() { return t_view; }

void prepare(int how, const sigset_t* set, Change* c) {
  c->set = set;
  c->before = c->after = t_view;
  if (!set || !g_kept) return;
  uint64_t named = kept_in(set);
  if (how == SIG_BLOCK || how == SIG_SETMASK) {
    c->after = how == SIG_SETMASK ? named : (c->before | named);
    if (named) {
      memcpy(&c->copy, set, sizeof c->copy);
      for (uint64_t k = named; k; k &= k - 1) sigdelset(&c->copy, __builtin_ctzll(k) + 1);
      c->set = &c->copy;
    }
  } else if (how == SIG_UNBLOCK) {
    // Passed down as it is: unblocking a kept signal is always right (an
    // external one, kept pending for the program, waits behind it).
    c->after = c->before & ~named;
  }
  // Before the call: a signal delivered on its way back must already see
  // the program's new view.
  t_view = c->after;
}

void commit(const Change& c, int rc, sigset_t* old) {
  if (rc != 0) {
    t_view = c.before;
    return;
  }
  if (old)
    for (uint64_t k = c.before; k; k &= k - 1) sigaddset(old, __builtin_ctzll(k) + 1);
}

TempView::TempView(const sigset_t* mask) : saved(t_view), active(mask && g_kept), passed(mask) {
  if (!active) return;
  t_view = kept_in(mask);
  if (t_retry_pending && sigismember(mask, g_ours) == 1) {
    memcpy(&copy, mask, sizeof copy);
    sigdelset(&copy, g_ours);
    passed = &copy;
  }
}
TempView::~TempView() {
  if (active) t_view = saved;
}

void set_retry_pending(bool pending) { t_retry_pending = pending; }

void unblock_for_program(int sig) {
  t_view &= ~bit(sig);
  kernel(SIG_UNBLOCK, bit(sig));
}

void thread_begin(uint64_t creator_view) {
  if (!g_kept) return;
  uint64_t blocked = kernel_blocked_kept();
  t_view = creator_view | blocked;
  kernel(SIG_UNBLOCK, blocked);
}

void before_exec() {
  if (g_kept) kernel(SIG_BLOCK, t_view);
}

void after_failed_exec() {
  if (g_kept) kernel(SIG_UNBLOCK, t_view);
}

}  // namespace sigmask
