// engine_wait: the wait profile as an engine (engine.h), as Go's block
// profile (runtime/pprof, printCountCycleProfile): contentions and delay,
// period 1 contention, from the blocking calls waits.h times; engine_table.h
// cuts its table into snapshots. Each sample's leaf is the blocking call
// itself, by its libc name (Sample::leaf); the label `call` says it too, for
// -tagfocus. Everything the shim does for the wait profile is wired here.
#include <stdio.h>

#include <string>

#include "engine.h"
#include "engine_table.h"
#include "go_runtime.h"
#include "sandbox.h"
#include "waits.h"

namespace engine {
namespace {

TableDelta g_delta;  // zero-initialised: no dynamic initialiser (DESIGN "Globals")

// A wait stack starts at the blocking call's caller (waits.h); the call is
// its leaf, by name.
void dress(const stack_table::Stack& st, const Self&, Sample* s) {
  s->leaf = waits::call_name(st.tag);
  pprof::Label call;
  call.key = "call", call.str = s->leaf;
  s->labels.push_back(call);
}

// Contentions round to whole ones (waits.cc keeps fractions): an entry that
// gained none is not in the part, whatever its delay.
const TableSource kSource = {waits::for_each, waits::thread_name, dress, /*weight_alone=*/false};

bool start(const config::Config& cfg, std::string* err) {
  return !cfg.wait_sample_ns || waits::start(cfg.wait_sample_ns, err);
}

bool on() { return waits::rate_ns() != 0; }

void begin(const When& now) { g_delta.begin(now); }

void halt() { waits::stop(); }

// The parent's seccomp filter is the child's: what it forbade stays off.
void after_fork_in_child() {
  waits::reset_after_fork();
  if (sandbox::running_forbidden()) waits::stop();
}

void resume() {
  if (!sandbox::running_forbidden()) waits::resume();
}

bool collect(Why why, const When& when, const Self& self, Part* out, std::string*) {
  if (why == Why::kPeak) return false;
  out->kind = "wait";
  out->types = {{"contentions", "count"}, {"delay", "nanoseconds"}};
  out->default_type = "delay";
  out->period_type = {"contentions", "count"};
  out->period = 1;
  out->comments = {"profshim: PROFILE_WAIT_SAMPLE=" + std::to_string(waits::rate_ns()) +
                   " ns of waiting per sample"};
  g_delta.collect(kSource, why == Why::kSnapshot, when, self, out);
  return true;
}

// " | waits 1.23 s": the threads' waiting, summed.
void figures(const Part*, summary::Figures* f) {
  if (!on()) return;
  char b[64];
  snprintf(b, sizeof b, " | waits %.2f s", double(g_delta.run_weight()) / 1e9);
  std::string said = b;
  // Waits the full table could not keep are in no profile: said, as the
  // CPU's dropped samples are.
  if (uint64_t lost = waits::stats().dropped) {
    snprintf(b, sizeof b, ", %llu dropped (the table was full)", (unsigned long long)lost);
    said += b;
  }
  if (go_runtime::is_go()) said += " (threads' only: goroutines waiting in Go's scheduler are not seen)";
  f->more.push_back(said);
}

}  // namespace

extern const Engine kWait;  // engine.cc's all()
const Engine kWait = {
    .name = "wait",
    .start = start,
    .on = on,
    .begin = begin,
    .halt = halt,
    .after_fork_in_child = after_fork_in_child,
    .resume = resume,
    .sandboxed = waits::stop,
    .quiet_thread = waits::quiet_thread,
    .for_each_since = waits::for_each_since,
    .table = &kSource,
    .collect = collect,
    .figures = figures,
    .release = waits::release_table,
};

}  // namespace engine
