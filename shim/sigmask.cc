// sigmask: the program's view of the shim's signal in its masks; see sigmask.h.
#include "sigmask.h"

#include <pthread.h>
#include <string.h>

#include "real.h"

namespace sigmask {
namespace {

int g_sig;  // 0 when inert: every wrapper passes straight through
__thread bool t_view;
__thread int t_internal;

bool kernel_blocks(int sig) {
  sigset_t cur;
  sigemptyset(&cur);
  return unfiltered(SIG_BLOCK, nullptr, &cur) == 0 && sigismember(&cur, sig) == 1;
}

void unblock_in_kernel(int sig) {
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  unfiltered(SIG_UNBLOCK, &one, nullptr);
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

void setup(int sig) {
  if (kernel_blocks(sig)) {
    t_view = true;
    unblock_in_kernel(sig);
  }
  g_sig = sig;
}

int ours() { return g_sig; }

bool view() { return t_view; }

void set_view(bool blocked) { t_view = blocked; }

void prepare(int how, const sigset_t* set, Change* c) {
  c->set = set;
  c->before = c->after = t_view;
  if (!set || !g_sig) return;
  bool has = sigismember(set, g_sig) == 1;
  if (how == SIG_BLOCK || how == SIG_SETMASK) {
    c->after = how == SIG_SETMASK ? has : (has || c->before);
    if (has) {
      memcpy(&c->copy, set, sizeof c->copy);
      sigdelset(&c->copy, g_sig);
      c->set = &c->copy;
    }
  } else if (how == SIG_UNBLOCK && has) {
    // Passed down as it is: unblocking ours is always right (an external
    // signal of that number, kept pending for the program, waits behind it).
    c->after = false;
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
  if (old && c.before && g_sig) sigaddset(old, g_sig);
}

void thread_begin(bool creator_view) {
  if (!g_sig) return;
  t_view = creator_view;
  if (kernel_blocks(g_sig)) {
    t_view = true;
    unblock_in_kernel(g_sig);
  }
}

void before_exec() {
  if (!g_sig || !t_view) return;
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, g_sig);
  unfiltered(SIG_BLOCK, &one, nullptr);
}

void after_failed_exec() {
  if (g_sig && t_view) unblock_in_kernel(g_sig);
}

}  // namespace sigmask
