// fatal_state: a fatal signal's verdict; see fatal_state.h.
#include "fatal_state.h"

#include <signal.h>

namespace fatal_state {

Verdict decide(const Facts& f) {
  if (!f.profiling) return Verdict::kStop;  // the stop paths see there is nothing to write
  // jemalloc's data for a thread in its teardown may be gone (its TLS
  // destructor ran): a stop here writes no heap profile, so another thread
  // that does not block the signal takes it, when there is one.
  if (!f.fault && f.thread_ending && f.another_takes(f.arg)) return Verdict::kElsewhere;
  if (!f.in_unsafe_code(f.arg)) return Verdict::kStop;
  // Its locks may be held by this very thread, and a stop needs them.
  if (!f.fault && f.retry_can_come && f.take_retry(f.arg)) return Verdict::kDefer;
  return Verdict::kRefuse;
}

const char* signal_name(int sig) {
  static const char* const kNames[] = {
      "signal 0",       "signal SIGHUP",    "signal SIGINT",  "signal SIGQUIT",   "signal SIGILL",
      "signal SIGTRAP", "signal SIGABRT",   "signal SIGBUS",  "signal SIGFPE",    "signal SIGKILL",
      "signal SIGUSR1", "signal SIGSEGV",   "signal SIGUSR2", "signal SIGPIPE",   "signal SIGALRM",
      "signal SIGTERM", "signal SIGSTKFLT", "signal 17",      "signal 18",        "signal 19",
      "signal 20",      "signal 21",        "signal 22",      "signal 23",        "signal SIGXCPU",
      "signal SIGXFSZ", "signal SIGVTALRM", "signal SIGPROF", "signal 28",        "signal SIGIO",
      "signal SIGPWR",  "signal SIGSYS"};
  // The real-time ones as kill -l names them: from SIGRTMIN up to the
  // middle, from SIGRTMAX down above it.
  static const char* const kRtMin[] = {
      "signal SIGRTMIN",    "signal SIGRTMIN+1",  "signal SIGRTMIN+2",  "signal SIGRTMIN+3",
      "signal SIGRTMIN+4",  "signal SIGRTMIN+5",  "signal SIGRTMIN+6",  "signal SIGRTMIN+7",
      "signal SIGRTMIN+8",  "signal SIGRTMIN+9",  "signal SIGRTMIN+10", "signal SIGRTMIN+11",
      "signal SIGRTMIN+12", "signal SIGRTMIN+13", "signal SIGRTMIN+14", "signal SIGRTMIN+15"};
  static const char* const kRtMax[] = {
      "signal SIGRTMAX",    "signal SIGRTMAX-1",  "signal SIGRTMAX-2",  "signal SIGRTMAX-3",
      "signal SIGRTMAX-4",  "signal SIGRTMAX-5",  "signal SIGRTMAX-6",  "signal SIGRTMAX-7",
      "signal SIGRTMAX-8",  "signal SIGRTMAX-9",  "signal SIGRTMAX-10", "signal SIGRTMAX-11",
      "signal SIGRTMAX-12", "signal SIGRTMAX-13", "signal SIGRTMAX-14", "signal SIGRTMAX-15"};
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) {
    int up = sig - SIGRTMIN, down = SIGRTMAX - sig;
    if (up <= down && up < 16) return kRtMin[up];
    if (down < 16) return kRtMax[down];
  }
  return sig > 0 && sig < int(sizeof kNames / sizeof kNames[0]) ? kNames[sig] : "a signal";
}

}  // namespace fatal_state
