// own_signal: dispatch of the shim's signal and the program's view of its
// disposition; see own_signal.h.
#include "own_signal.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>

#include "freeze.h"
#include "lifecycle.h"
#include "sandbox.h"
#include "real.h"
#include "sampler.h"
#include "sigmask.h"
#include "signals.h"
#include "stackwalk.h"
#include "stackwalk_guard.h"
#include "sys.h"

namespace own_signal {
namespace {

struct State {
  char tokens[kKinds];  // their addresses are the values our requests carry
  pid_t pid;
  uid_t uid;
  // The program's view of the disposition. Written rarely (a program that
  // takes this signal number), under a lock held with every signal blocked;
  // read in the handler through the sequence number.
  struct sigaction view;
  std::atomic<uint32_t> seq;
  std::atomic<bool> lock;
  // Linux 5.11 on keeps only the flags it knows and says so by dropping
  // SA_UNSUPPORTED: the view keeps what the kernel would have.
  bool kernel_drops_unknown_flags;
};
#ifndef SA_UNSUPPORTED
#define SA_UNSUPPORTED 0x00000400
#endif
#ifndef SA_EXPOSE_TAGBITS
#define SA_EXPOSE_TAGBITS 0x00000800
#endif
// The kernel's UAPI_SA_FLAGS on x86_64.
constexpr unsigned long kKnownFlags = SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK | SA_RESTART |
                                      SA_NODEFER | SA_RESETHAND | SA_EXPOSE_TAGBITS | 0x04000000 /* SA_RESTORER */;
State g;  // zero-initialised: no dynamic initialiser (DESIGN "Globals")

void* token(Kind k) { return &g.tokens[k]; }

int token_kind(const void* v) {
  for (int k = 0; k < kKinds; ++k)
    if (v == &g.tokens[k]) return k;
  return -1;
}

void read_view(struct sigaction* out) {
  for (;;) {
    uint32_t s = g.seq.load(std::memory_order_acquire);
    if (s & 1) continue;
    memcpy(out, &g.view, sizeof *out);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g.seq.load(std::memory_order_relaxed) == s) return;
  }
}

void write_view(const struct sigaction* v) {
  sigset_t all, old;
  sigfillset(&all);
  sigmask::unfiltered(SIG_SETMASK, &all, &old);
  while (g.lock.exchange(true, std::memory_order_acquire)) {
  }
  g.seq.fetch_add(1, std::memory_order_acq_rel);
  memcpy(&g.view, v, sizeof g.view);
  g.seq.fetch_add(1, std::memory_order_release);
  g.lock.store(false, std::memory_order_release);
  sigmask::unfiltered(SIG_SETMASK, &old, nullptr);
}

bool is_dfl(const struct sigaction& v) { return v.sa_handler == SIG_DFL; }
bool is_ign(const struct sigaction& v) { return v.sa_handler == SIG_IGN; }

// A signal of our number that is not the shim's, met as the kernel would
// have met it without the shim.
void external(int sig, siginfo_t* si, void* uc) {
  struct sigaction v;
  read_view(&v);
  if (is_ign(v)) return;
  if (sigmask::view()) {
    // The program blocks it on this thread: pending, blocked, until the
    // program unblocks it or waits for it -- as in the kernel without us.
    sigaddset(&static_cast<ucontext_t*>(uc)->uc_sigmask, sig);
    syscall(SYS_rt_tgsigqueueinfo, g.pid, sys::gettid(), sig, si);
    return;
  }
  if (is_dfl(v)) {
    signals::fatal(sig, si, uc);  // its default action ends the process
    return;
  }
  // The program's handler, with the mask the kernel would have given it
  // (the interrupted one, its sa_mask; ours never) and its flags. Ours runs
  // with everything blocked; sigreturn restores the interrupted mask.
  sigset_t mask;
  memcpy(&mask, &static_cast<ucontext_t*>(uc)->uc_sigmask, sizeof mask);
  sigorset(&mask, &mask, &v.sa_mask);
  sigdelset(&mask, sig);
  // Ours runs on the alternate stack, when the thread has one, and so does
  // the program's handler, asked for with SA_ONSTACK or not. The shim's
  // signal then waits until it returns, as for any handler of the
  // program's there (signals.cc): a stack of 8 KiB has no room for both.
  if (stackwalk::on_alt_stack(uc)) sigaddset(&mask, sig);
  sigmask::unfiltered(SIG_SETMASK, &mask, nullptr);
  sigmask::set_view(!(v.sa_flags & SA_NODEFER) || sigismember(&v.sa_mask, sig) == 1);
  if (v.sa_flags & SA_RESETHAND) {
    // The kernel resets the handler alone: flags and mask stay.
    struct sigaction dfl = v;
    dfl.sa_handler = SIG_DFL;
    write_view(&dfl);
  }
  {
    sigmask::ProgramCode program;
    if (v.sa_flags & SA_SIGINFO)
      v.sa_sigaction(sig, si, uc);
    else
      v.sa_handler(sig);
  }
  sigmask::set_view(false);
}

// A thread the shim did not start got no alternate stack from it: the
// shim's handler lands wherever the thread runs, where it cannot tell the
// room (a coroutine's stack), and takes the leaf alone. Its first signal
// gives it one, once: one the program takes away stays away.
__thread bool t_altstack_offered;

void handler(int sig, siginfo_t* si, void* uc) {
  int saved = errno;
  stackwalk::note_trampoline(__builtin_return_address(0));  // the kernel's return: its trampoline
  if (!t_altstack_offered && !stackwalk::thread_stack_noted()) {
    t_altstack_offered = true;
    signals::altstack_on_return(uc);
  }
  void* v = si ? si->si_value.sival_ptr : nullptr;
  int kind = -1;
  sigmask::Internal inside;
  if (si && si->si_code == SI_TIMER && sampler::owns(v)) {
    sampler::on_timer(si, uc);
  } else if (si && ((si->si_code == SI_TIMER && (kind = token_kind(v)) != kFreeze && kind >= 0) ||
                    (si->si_code == SI_QUEUE && si->si_pid == g.pid && (kind = token_kind(v)) == kFreeze))) {
    if (kind == kFreeze) freeze::on_request(uc);
    if (kind == kWatchdog) lifecycle::on_watchdog(uc);
    if (kind == kRetryFatal) lifecycle::on_retry_fatal(si, uc);
  } else {
    external(sig, si, uc);
  }
  errno = saved;
}

}  // namespace

int number() { return SIGRTMAX - 4; }

namespace {
void our_action(struct sigaction* out) {
  struct sigaction& sa = *out;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  // SA_RESTART: a sample must not make the program's read() fail with EINTR.
  // SA_ONSTACK: a thread that has an alternate stack may run on stacks no
  // handler of others' can use -- a goroutine's few KiB (Go's rule for any
  // handler in a cgo program), an Erlang process's stack under BEAM's JIT --
  // and the frame the kernel pushes there lands on someone else's memory.
  // Every signal blocked while it runs: nothing interrupts it halfway
  // through an unwind or a table update (faults excepted), and nothing
  // lands on the alternate stack's top, where its frames are. But SIGSYS:
  // a seccomp trap of the handler's own call must reach the shim's answer
  // (sandbox.h); blocked, the kernel would kill the process with it.
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK | SA_UNSUPPORTED;
  sigfillset(&sa.sa_mask);
  sigdelset(&sa.sa_mask, SIGSYS);
}
}  // namespace

bool install(std::string* err) {
  g.pid = pid_t(syscall(SYS_getpid));
  g.uid = getuid();
  struct sigaction sa, old;
  our_action(&sa);
  if (real::sigaction()(number(), &sa, &old) != 0) {
    *err = std::string("cannot install the shim's signal handler: ") + strerror(errno);
    return false;
  }
  struct sigaction now;
  g.kernel_drops_unknown_flags = real::sigaction()(number(), nullptr, &now) == 0 && !(now.sa_flags & SA_UNSUPPORTED);
  // Inherited across exec as ignored stays ignored for the program.
  write_view(&old);
  return true;
}

bool send(pid_t tid, Kind k) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = number();
  si.si_code = SI_QUEUE;
  si.si_pid = g.pid;
  si.si_uid = g.uid;
  si.si_value.sival_ptr = token(k);
  return syscall(SYS_rt_tgsigqueueinfo, g.pid, tid, number(), &si) == 0;
}

int arm_self(Kind k, uint64_t ns) {
  sandbox::OwnCalls own;
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = number();
  sev.sigev_value.sival_ptr = token(k);
  sev._sigev_un._tid = sys::gettid();
  int id = -1;
  if (sandbox::timers_forbidden() || syscall(SYS_timer_create, CLOCK_MONOTONIC, &sev, &id) != 0) return -1;
  struct itimerspec its;
  memset(&its, 0, sizeof its);
  its.it_value.tv_sec = time_t(ns / 1000000000ull);
  its.it_value.tv_nsec = long(ns % 1000000000ull);
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  if (syscall(SYS_timer_settime, id, 0, &its, nullptr) != 0) {
    syscall(SYS_timer_delete, id);
    return -1;
  }
  return id;
}

void disarm(int timer_id) {
  // One made before a filter that forbids the call stays: it fires once,
  // and its signal finds nothing to do.
  if (timer_id >= 0 && !sandbox::timers_forbidden()) syscall(SYS_timer_delete, timer_id);
}

int on_sigaction(const struct sigaction* act, struct sigaction* old) {
  struct sigaction before;
  read_view(&before);
  if (act) {
    struct sigaction v = *act;
    // What a query would have returned had it been installed: glibc adds
    // SA_RESTORER and its restorer to every installation (ours included).
    struct sigaction k;
    if (real::sigaction()(number(), nullptr, &k) == 0) {
      v.sa_flags |= (k.sa_flags & 0x04000000 /* SA_RESTORER */);
      v.sa_restorer = k.sa_restorer;
    }
    if (g.kernel_drops_unknown_flags) v.sa_flags &= int(kKnownFlags);
    write_view(&v);
  }
  if (old) *old = before;
  return 0;
}

bool consume_if_ours(int sig, const siginfo_t* si) {
  if (sig != number() || !si || !sigmask::ours()) return false;
  const void* v = si->si_value.sival_ptr;
  if (si->si_code == SI_TIMER && sampler::owns(v)) {
    sampler::on_lost_timer(si);
    return true;
  }
  int kind = token_kind(v);
  if (si->si_code == SI_TIMER && kind >= 0 && kind != kFreeze) {
    if (kind == kRetryFatal) lifecycle::on_retry_fatal(si, nullptr);
    return true;
  }
  if (si->si_code == SI_QUEUE && si->si_pid == g.pid && kind == kFreeze) {
    // A thread in sigwait holds nothing of the stop's: it parks here.
    freeze::park_here();
    return true;
  }
  return false;
}

// An exec keeps an ignored signal ignored and resets a handled one: the
// kernel's disposition of this number is always the shim's handler, so the
// program's "ignored" would end at the exec, and the new program die of
// the signal. Before it the kernel's becomes the program's (the stop has
// run: nothing of the shim's is on its way); a failed exec puts ours back.
// In a vfork child the dispositions are its own, not its parent's.
void before_exec() {
  if (sandbox::signals_forbidden()) return;  // a filter that may kill rt_sigaction
  struct sigaction v;
  read_view(&v);
  if (!is_ign(v)) return;
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  real::sigaction()(number(), &ign, nullptr);
}

void after_failed_exec() {
  if (sandbox::signals_forbidden()) return;
  struct sigaction v, sa;
  read_view(&v);
  if (!is_ign(v)) return;
  our_action(&sa);
  real::sigaction()(number(), &sa, nullptr);
}

void after_fork() {
  if (!sandbox::getpid_forbidden()) g.pid = pid_t(syscall(SYS_getpid));
  g.lock.store(false);
  if (g.seq.load() & 1) g.seq.fetch_add(1);
}

}  // namespace own_signal
