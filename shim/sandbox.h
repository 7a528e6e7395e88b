// sandbox: what a seccomp filter the program installs leaves of the shim.
//
// A filter is in force for the rest of the process's life (and its
// children's, and across exec); a system call of the shim's that the filter
// kills kills the program (SIGSYS, or SIGKILL), where without the shim the
// program lives. The kernel does not let a process read a filter back, but
// the program hands it over through prctl(PR_SET_SECCOMP) or the seccomp
// system call (interposed, hooks_sandbox.cc): there, before it is in force,
// the shim runs it (seccomp_bpf.h) on every call it would make later, and
// gives up what the filter would kill while everything is still allowed:
//  - the calls made while the program runs (CPU timers, alternate stacks,
//    thread names, clocks): sampling and the wait profile end here; what
//    was recorded before stays for the stop;
//  - the calls of the stop (files, the stop's thread, /proc): no stop at
//    all, and no snapshot; the line says so now, when it still can;
//  - madvise, which the shim's jemalloc makes on the program's free(): it
//    keeps what is freed from then on (heap.h, keep_freed), and neither
//    it nor the shim makes the call again (sys::advise). Whether the
//    shim profiles or not: jemalloc may serve an image whose setup failed.
// A call the filter makes fail (SECCOMP_RET_ERRNO) is left to fail: the
// shim handles a failed call as it handles any other.
//
// Not seen: a filter in force before the program started (systemd's
// SystemCallFilter=, a container runtime's): it must allow what the shim
// needs (docs/DESIGN.md lists the calls); a filter installed with a raw
// system call instruction (Go's runtime, a static binary).
#pragma once
#include <signal.h>

namespace sandbox {

// Called with the arguments of a filter's installation, before it is
// passed on (mode: SECCOMP_SET_MODE_* for the seccomp call, or the
// prctl's SECCOMP_MODE_*; prog: its struct sock_fprog*). Acts on what the
// filter forbids, once per process for each kind.
void before_seccomp_call(unsigned op, unsigned flags, const void* prog);
void before_prctl_seccomp(unsigned long mode, const void* prog);

// Whether a filter in force forbids what the stop needs (then nothing is
// written) or what sampling needs (then nothing is armed).
bool stop_forbidden();
bool running_forbidden();
// Whether it forbids the shim's one-shot timers: they are then taken as
// failed to start, which the shim copes with (a stop without its watchdog).
bool timers_forbidden();
// Whether it forbids a fork child's hand-over (forks.h: kill of its owner,
// the shared mapping, the blob's write): then children write their own
// files, and nothing else of the stop is given up.
bool hand_over_forbidden();
// Whether it kills getpid: then the stop and sampling are given up too, and
// nothing may ask the pid again (a vfork child cannot be told apart).
bool getpid_forbidden();
// Whether it forbids what the shim's handlers need (rt_sigaction among
// them): the shim's handlers stepped aside.
bool signals_forbidden();
// Whether the program put any filter in force (seen going in): calls
// beyond the probed ones are not to be made at a stop.
bool filter_seen();

// A filter the shim did not see go in (installed with the program's own
// system call instruction: Chromium's sandbox) may trap a call of the
// shim's (SECCOMP_RET_TRAP: SIGSYS, whose handler there reports a crash).
// Where the shim makes calls on a program's thread on its own account (a
// thread's start and end, the sampling signal), it marks the thread; a
// trapped call made there is answered ENOSYS, as a filter's failure would
// be, and no thread started later is armed. Signal-safe; the marks nest.
struct OwnCalls {
  OwnCalls();
  ~OwnCalls();
};
// From the SIGSYS handler, before the program's: true when the signal is
// a trap of the shim's own call (then answered, and to be returned from).
bool absorb_trap(int sig, const siginfo_t* si, void* uc);
// The line for a trap absorbed since, once; not from a signal handler.
void say_trapped();

}  // namespace sandbox
