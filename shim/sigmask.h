// sigmask: the shim's signal is never blocked in the kernel, whatever masks
// the program sets, inherits or waits with, and yet every mask query answers
// as it would without the shim -- the way glibc keeps SIGCANCEL and SIGSETXID
// its own. liblzma's workers, a "signal thread" program's threads, anything
// created after pthread_sigmask(SIG_BLOCK, all) would otherwise never get a
// CPU sample.
//
// The same holds for the synchronous faults and traps (SIGSEGV, SIGBUS,
// SIGFPE, SIGILL, SIGTRAP, SIGSYS): the kernel kills a thread that faults
// with one blocked without running any handler, so a crash in a worker that
// blocks every signal would leave no profile.
//
// Per thread, a bit per kept signal remembers whether the program wants it
// blocked (its view); the kernel's mask never has them. The wrappers of the
// persistent mask calls (sigprocmask, pthread_sigmask, sighold, sigrelse,
// sigset's SIG_HOLD) filter what they pass down and add the bit back to
// what they report; each stays one system call. Masks that only last a call
// (sigsuspend, pselect, ppoll, epoll_pwait, sigwait's set) pass unchanged:
// a thread waiting there uses no CPU, so it loses no sample, and an external
// sender's signal of that number meets the program's own mask.
//
// Signal-safe: a thread-local bit and the raw system call.
#pragma once
#include <signal.h>
#include <stdint.h>

namespace sigmask {

// Profiling is active and ours is the shim's signal: filter from now on.
// Reads the calling (main) thread's kernel mask: a mask inherited across
// exec that blocks a kept signal becomes that thread's view, and the
// kernel's is cleared.
void setup(int ours);
// 0 when inert.
int ours();

// The program's view for the calling thread: of the shim's signal, of any
// kept signal, and all of it (a new thread inherits its creator's).
bool view();
bool view_blocks(int sig);
void set_view(bool blocked);
uint64_t view_bits();
// sigrelse(sig) / a signal the program unblocks outright: view and kernel.
void unblock_for_program(int sig);

// For a call that waits with a mask of its own (sigsuspend, ppoll,
// pselect, epoll_pwait): the view is that mask's while it waits, so a signal
// the shim kept pending for the program is delivered or kept as the
// program's temporary mask says. The mask passes to the kernel unchanged
// (pass()), except while a fatal signal deferred on this thread waits for
// its retry on the shim's signal: then without it, or the retry would wait
// as long as the call does, possibly for ever.
struct TempView {
  uint64_t saved;
  bool active;
  const sigset_t* passed;
  sigset_t copy;
  explicit TempView(const sigset_t* mask);
  ~TempView();
  const sigset_t* pass() const { return passed; }
};
// lifecycle's: a fatal signal deferred on this thread, its retry to come.
void set_retry_pending(bool pending);

// A persistent mask change: prepare() gives the set to hand the kernel (set
// itself, or c->copy without our signal) and records the view the call
// asks for; commit() puts the view back if the call failed (rc != 0), else
// adds our signal to *old where the view had it.
struct Change {
  const sigset_t* set;
  uint64_t before, after;
  sigset_t copy;
};
void prepare(int how, const sigset_t* set, Change* c);
void commit(const Change& c, int rc, sigset_t* old);

// In a thread's first instruction: the view its creator had, and the kept
// signals unblocked if the kernel gave the thread a mask with them
// (pthread_attr_setsigmask_np, a creator that blocked everything).
void thread_begin(uint64_t creator_view);

// Around exec: the kernel mask the new image inherits is the program's
// view (a program that blocks everything and execs passes that on); undone
// if the exec fails.
void before_exec();
void after_failed_exec();

// The shim's own code on this thread (its signal handlers, its threads):
// mask calls made there (libdw's, say) pass straight through.
struct Internal {
  Internal();
  ~Internal();
};
bool internal();
// Back in the program's code for a while (a program's handler the shim
// calls): its mask calls are filtered again.
struct ProgramCode {
  int saved;
  ProgramCode();
  ~ProgramCode();
};

// libc's pthread_sigmask, without our filtering (glibc still keeps its own
// signals out): for the shim's own threads and a handler's emulation.
int unfiltered(int how, const sigset_t* set, sigset_t* old);

}  // namespace sigmask
