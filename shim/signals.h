// signals: the fatal-signal stop path and the program's view of signal
// dispositions.
//
// Contract:
//  - fatal() runs in signal context (the handler of every fatal signal whose
//    disposition is the default, and own_signal's for its default action).
//    It hands the stop to lifecycle::stop_on_fatal, then restores SIG_DFL
//    and lets the signal take its default effect, so the process dies of
//    the same signal with its core-dump behaviour unchanged.
//  - A handler is installed only where the disposition is SIG_DFL: an
//    ignored signal stays ignored; the program's own handler or SIG_IGN
//    replaces ours for real, SIG_DFL puts ours back.
//  - The kernel's action is the program's view, except for a few flags kept
//    beside it (what the program asked for when ours stands in for its
//    SIG_DFL, and whether its sa_mask named the shim's signal, which the
//    kernel never gets). So every call of the sigaction family is the one
//    system call it is without the shim, lock-free (a fork, or a handler
//    that re-arms itself with signal(), can never find a lock held).
#pragma once
#include <signal.h>

namespace signals {

// At setup, when profiling is active: our handler where the disposition is
// the default -- the fatal stop's for the fatal signals, the snapshot's for
// snapshot_sig (PROFILE_SNAPSHOT_SIGNAL, 0 if none), which is then not a
// fatal one. The snapshot's gives way as the fatal one does: the program's
// own handler or SIG_IGN replaces it, its SIG_DFL puts it back. Returns
// whether the snapshot's is in place (not where the signal was inherited
// ignored).
bool install(int snapshot_sig);

// Whether install() has run: the interposed calls pass straight through
// until then.
bool active();
// A seccomp filter about to go in forbids what the shim's handlers need
// (sandbox.h): every action of the shim's in the kernel becomes the
// program's own again (SIG_DFL where ours stood in, its handler where the
// shim routed it), and the calls pass straight through from here on. Not
// signal-safe; once.
void step_aside();

// The interposed calls' bodies (each passes straight through when inert;
// the ones glibc builds on its own sigaction in signals_glibc.cc).
int on_sigaction(int sig, const struct sigaction* act, struct sigaction* old);
sighandler_t on_bsd_signal(int sig, sighandler_t handler);   // signal, bsd_signal, ssignal
sighandler_t on_sysv_signal(int sig, sighandler_t handler);  // sysv_signal, __sysv_signal
sighandler_t on_sigset(int sig, sighandler_t disp);          // sigset
int on_siginterrupt(int sig, int interrupt);
int on_sigignore(int sig);

// A fatal signal's stop and death (signal context).
void fatal(int sig, siginfo_t* si, void* uc);
// The fatal handler stands in for the program's SIG_DFL of sig now.
bool serves_default(int sig);
// The snapshot signal (signal context): asks the snapshot worker, nothing
// more (it never writes in a handler).
void snapshot(int sig, siginfo_t* si, void* uc);
// A fault or trap the kernel raised at an instruction of this thread, which
// no mask holds back (SIGTRAP and SIGSYS too: a breakpoint, seccomp's trap).
bool synchronous_fault(int sig, const siginfo_t* si);

// Gives the calling thread an alternate signal stack if it has none, so the
// fatal-signal handler can run on a stack overflow. Returns the stack to
// pass to release_altstack() when the thread ends, or null if the thread
// already had one (the program's) or none could be mapped.
void* ensure_altstack();
void release_altstack(void* stack);
// In a handler of the shim's, on a thread that has none (one that ran before
// the shim loaded): an alternate stack from the handler's return on, set in
// its context, which the kernel restores then. Never unmapped: no exit of
// that thread reaches the shim. Signal-safe.
void altstack_on_return(void* ucontext);
// The program's sigaltstack: the shim's own stack reads as none. One the
// program replaces stays mapped until the thread ends (release_altstack).
int on_sigaltstack(const stack_t* ss, stack_t* old);
// sigaltstack without the program's view, for the shim's own calls.
int raw_sigaltstack(const stack_t* ss, stack_t* old);
// Whether an alternate stack starting at ss_sp is the one the shim gave
// this thread. Signal-safe.
bool is_shim_altstack(const void* ss_sp);

// A program's handler installed with SA_ONSTACK (signals_onstack.cc): the
// kernel runs it on the shim's alternate stack where, without the shim, it
// would have run on the thread's own; such handlers are routed through
// ours (profshim_route_handler), which moves the frame back there.
// Whether act's handler is routed for that: a handler of a C program's.
bool onstack_routed(const struct sigaction* act);
// At a routed handler's delivery (signal context): the kernel's frame,
// from frame (the entry stack pointer) to the alternate stack's top,
// copied where the kernel would have put it without the shim, if it lies
// on the shim's alternate stack and the interrupted code ran on the
// thread's own. Returns how far it moved (0: it stays); uc is the
// original's.
long onstack_move(const struct sigaction& prog, void* uc, unsigned long frame);

}  // namespace signals
