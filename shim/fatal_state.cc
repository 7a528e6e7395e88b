// fatal_state: a fatal signal's verdict; see fatal_state.h.
#include "fatal_state.h"

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

}  // namespace fatal_state
