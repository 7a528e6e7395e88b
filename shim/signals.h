// signals: the fatal-signal stop path and the program's view of signal
// dispositions.
//
// Contract:
//  - fatal_handler() is the only function here that runs in signal context.
//    It asks lifecycle for the stop (futex wake + bounded futex wait, both
//    async-signal-safe; the writing itself runs on the stop thread, never in
//    the handler), then restores SIG_DFL and lets the signal take its
//    default effect, so the process dies of the same signal with its
//    core-dump behaviour unchanged.
//  - A handler is installed only where the disposition was SIG_DFL when the
//    shim loaded: an ignored signal stays ignored.
//  - sigaction()/signal() from the program go through on_sigaction(): the
//    program's own handler or SIG_IGN replaces ours for real; SIG_DFL puts
//    ours back; queries report what the program would see without the shim.
//    The CPU sampler's signal is managed the same way and hidden from
//    queries; a program that installs a handler on it gets it, and the
//    summary says the CPU profile stopped there.
#pragma once
#include <signal.h>

namespace signals {

// At setup, when profiling is active. sampling_signal < 0 if none.
void install(int sampling_signal);
// The interposed sigaction's body.
int on_sigaction(int sig, const struct sigaction* act, struct sigaction* old);
// The interposed signal()'s body (BSD semantics, as glibc's).
sighandler_t on_signal(int sig, sighandler_t handler);
// Gives the calling thread an alternate signal stack if it has none, so the
// fatal-signal handler can run on a stack overflow. Returns the stack to
// pass to release_altstack() when the thread ends, or null if the thread
// already had one (the program's) or none could be mapped.
void* ensure_altstack();
void release_altstack(void* stack);

// True if the program took the sampling signal for itself.
bool sampling_signal_taken();
// Discards pending instances of the sampling signal (before exec: a
// thread-directed signal survives execve, and the new image has no handler
// for it). Keeps the shim's handler installed.
void discard_pending_sampling_signal();

}  // namespace signals
