// own_signal: the shim's real-time signal (SIGRTMAX-4), owned the way glibc
// owns SIGCANCEL: its handler is always the shim's while profiling, the
// program's masks never block it (sigmask.h), and what the program asks of
// that number it gets as it would without the shim.
//
// One handler tells apart, by si_code and si_value:
//  - a CPU timer of the sampler (SI_TIMER, the value a slot of its table);
//  - the shim's own requests: "freeze" sent by a fatal stop to the other
//    threads (SI_QUEUE from this process), a fatal stop's watchdog and the
//    retry of a fatal signal that came inside the allocator (SI_TIMER, the
//    value one of our tokens);
//  - anything else (kill from outside, the program's own timer or sigqueue):
//    the program's, handled as its disposition says: ignored, kept pending
//    while its view of the thread's mask blocks it, its handler run with its
//    sa_mask and flags, or, by default, a fatal stop and death by the signal.
//
// The handler runs on the thread's alternate stack (SA_ONSTACK), when it has
// one: the stack the program's code runs on may be no C stack at all (a
// goroutine's). Signal-safe throughout.
#pragma once
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include <string>

namespace own_signal {

int number();

// Installs the handler; the program's view starts as the kernel's action was.
bool install(std::string* err);

enum Kind { kFreeze = 0, kWatchdog, kRetryFatal, kKinds };
// Sends a request of ours to one thread of this process.
bool send(pid_t tid, Kind k);
// A one-shot CLOCK_MONOTONIC timer that signals the calling thread after ns;
// the kernel's timer id, or -1. Raw system calls: safe in a handler.
int arm_self(Kind k, uint64_t ns);
void disarm(int timer_id);

// The program's sigaction() on our signal: its view changes, our handler stays.
int on_sigaction(const struct sigaction* act, struct sigaction* old);

// For sigwait and friends, which take pending signals without a handler: true
// if what they dequeued is the shim's (then dealt with here), so the caller
// waits again.
bool consume_if_ours(int sig, const siginfo_t* si);

// Around an exec: a signal of this number the program ignores is ignored
// in the kernel too, as the exec'd program must find it; back to the
// shim's handler if the exec fails.
void before_exec();
void after_failed_exec();

// In a fork child: its own pid, and the view's lock free.
void after_fork();

}  // namespace own_signal
