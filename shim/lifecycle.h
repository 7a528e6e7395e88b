// lifecycle: the process image's profiling state machine
// (INERT | RUNNING -> STOPPING -> DONE): which stop path claims the stop,
// who waits for it and how long, and what fork, exec and thread ends do to
// the image. setup.cc sets profiling up and starts it; stop_runner.h says
// where a claimed stop runs (a thread of its own, or a fatal signal's
// handler on a stack of its own, after the program's other threads are
// parked), finish.h what it writes.
//
// A stop asked in the normal course (return from main, exit, _exit, exec,
// the last thread's end) is waited for at most PROFILE_STOP_TIMEOUT. A
// fatal signal's stop has a timer as its watchdog: when the bound passes
// the process dies of its signal as it would have. A fatal signal that
// comes while its thread is inside the allocator (whose locks the stop
// needs) is taken again a millisecond later, when the thread has left it
// (fatal_stop.cc).
#pragma once
#include <signal.h>
#include <stdint.h>

#include "config.h"

namespace lifecycle {

// The end of setup (setup.cc): the image runs, with its stop paths armed.
// Returns when it began (CLOCK_MONOTONIC ns).
uint64_t start(const config::Config* cfg, const char* timeout_text);

// True from a successful setup until the stop completes.
bool active();
// True once set up, whatever the state (false: inert, every hook passes through).
bool profiling();
// The directory the stop writes in (absolute once set up).
const std::string& profile_dir();
// Asks for the image's profiles and waits for them, at most the stop
// timeout. Idempotent and race-free: the first caller starts the stop, every
// caller (a second thread in exit, say) waits for the same one. Does
// nothing in a vfork child, which shares the parent's memory.
void stop(const char* how);

// A fatal signal's stop (signal context). True: deferred, the handler
// returns and the signal comes again shortly; false: the stop is done (or
// given up) and the caller lets the signal end the process.
bool stop_on_fatal(int sig, siginfo_t* si, void* uc);
// own_signal's dispatch of the shim's timers (signal context): a fatal
// stop past its bound, and a deferred fatal signal's second try.
void on_watchdog(void* ucontext);
// ucontext is null where a sigwait took the retry's signal (not a handler).
void on_retry_fatal(const siginfo_t* si, void* ucontext);
// The fatal handler takes sig although the program's view blocks it: the
// retry of a deferred signal (on_retry_fatal).
bool retry_forced(int sig);

// Around an exec: writes the old image's profiles and returns the
// environment to exec with (envp itself, or a copy of its own carrying the
// image marker). path ("" for a descriptor) and argv0 (may be null) name
// the program it starts, for PROFILE_ONLY. exec_failed(envp, env) frees
// that copy and resumes profiling when the exec returned.
char* const* before_exec(char* const envp[], const char* path, const char* argv0);
void exec_failed(char* const envp[], char* const* env);

// True in a child of vfork (or posix_spawn), which shares the parent's
// memory: the shim must write nothing there.
bool in_vfork_child();

// Before the program closes descriptors lo..hi (close, dup2 over, and the
// like): the ones the shim keeps are let go (errline's stderr duplicate,
// fsroot's saved root). Nothing in a vfork child, whose table is its own
// but whose memory is the parent's.
void before_close(unsigned lo, unsigned hi);

// pthread_exit from the main thread: the process lives on until its last
// thread ends, and libc's own exit then is not one an interposer sees.
void main_thread_exiting();
// Around pthread_create: counted before the thread exists (main may call
// pthread_exit before the new thread first runs), uncounted if creation
// fails; thread_started() runs in the new thread: its alternate stack, its
// view of the shim's signal (its creator's), its CPU timer (start_fn names
// CPU it uses before its first sample), and its end armed.
void thread_creating();
void thread_create_failed();
// A thread started through the shim ends (returns or pthread_exit).
void thread_ending();
void thread_started(uint64_t creator_view, void* start_fn);
// Before the program's chroot: the root it had is kept for the shim's own
// paths (fsroot.h), and libdw loaded while the loader can still find it.
// Nothing when inert, nor in a vfork child.
void root_changing();

// A seccomp filter the program is about to put in force kills a call the
// shim makes while the program runs (stop=false: sampling and the wait
// profile end now) or at the stop (stop=true: no stop, no snapshot). Says
// so on stderr (why: what it forbids). Called before the filter is in.
void sandboxed(const char* why, bool stop);

}  // namespace lifecycle
