// fatal_state: the named states of a fatal signal's stop, the one
// decision its handler makes (fatal_stop.cc), and the stop's name for it. Pure: the facts come in, the
// verdict goes out, so a unit test reaches every verdict with made-up
// facts, no signal sent (tests/unit/fatal_state_test.cc).
#pragma once

namespace fatal_state {

// Where the image is with fatal signals, process-wide (fatal_stop.cc keeps
// the signal of each, this is what they add up to; the later phase wins).
enum class Phase : int {
  kQuiet,     // none acted on
  kDeferred,  // one came in code a stop cannot interrupt and is taken
              // again in a moment (the shim's retry timer); the program's
              // other threads are held at the shim's wrappers meanwhile
  kDying,     // one was taken: the process dies of it once the stop under
              // way (its own or another path's) is over
  kStopping,  // its stop runs on the signalled thread, under the watchdog
              // that lets the signal end the process past the bound
};

// What the handler does with a fatal signal.
enum class Verdict : int {
  kElsewhere,  // the thread is in its teardown: sent again to the process,
               // blocked here, for a thread that is there
  kDefer,      // interrupted in unsafe code (the allocator, the loader, or
               // something of the shim's held: stackwalk.h): taken again
               // when the thread has left it
  kRefuse,     // in unsafe code and cannot wait (a fault, the retry signal
               // blocked where it came, retries used up): no stop; the
               // process dies of it with one line that says why
  kStop,       // stopped for here (or the stop under way waited for), then
               // the process dies of it
};

// What the handler knows. The last three are asked only when the answer
// matters, in the order listed (each may walk a stack, look at other
// threads, or use up one of the bounded retries), with arg.
struct Facts {
  bool profiling = false;       // the image is running or stopping
  bool fault = false;           // a synchronous fault: it cannot be taken again
  bool thread_ending = false;   // past its start routine, in glibc's teardown
  bool retry_can_come = false;  // the interrupted context lets the shim's signal in
  bool (*another_takes)(void* arg) = nullptr;   // another thread does not block it
  bool (*in_unsafe_code)(void* arg) = nullptr;  // stackwalk::interrupted_in_unsafe_code
  bool (*take_retry)(void* arg) = nullptr;      // a retry is left, and is now used
  void* arg = nullptr;
};

Verdict decide(const Facts& f);

// How a fatal signal's stop names itself ("signal SIGTERM", "signal
// SIGRTMIN+3", as kill -l names them): a constant string, signal-safe.
const char* signal_name(int sig);

}  // namespace fatal_state
