// recover: the stop's way out when it cannot go on. The stop runs inside the
// program's process at its most fragile moment (out of memory, a crash, a
// corrupt binary on disk): a fault in the shim's stop code, or an allocation
// of the shim's failing, must end the stop with one line, never the process
// with another status (an uncaught std::bad_alloc would abort it).
//
// The shim's operator new and delete live here (jemalloc's own C++ operators
// are left out of the build): a failed allocation returns to the innermost
// recovery point of the thread.
#pragma once

namespace recover {

// Runs fn(arg) with a way out: a fault in it (reported by the fatal-signal
// handler through escape_from_fault) or a failed allocation of the shim's
// returns here with false and *why set ("out of memory", "the stop crashed
// (SIGSEGV)"). Signal-safe apart from what fn does.
bool run(void (*fn)(void*), void* arg, const char** why);

// Whether the calling thread is inside run().
bool active();

// From the fatal-signal handler: leaves run() (does not return).
[[noreturn]] void escape_from_fault(int sig);

// Leaves run() with why (only while active()): a library the shim uses
// reported a failure its own way (libdw's error(EXIT_FAILURE, ENOMEM, ...),
// an exit()), which must end the stop, not print or end the process.
[[noreturn]] void fail(const char* why);

}  // namespace recover
