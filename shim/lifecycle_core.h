// lifecycle_core: what the stop paths share inside lifecycle (the image's
// state, the claim of its stop and the bounded wait for it), between
// lifecycle.cc (the normal paths, fork, exec, threads) and fatal_stop.cc
// (a fatal signal's stop). Not for the rest of the shim: lifecycle.h is.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <string>

#include "config.h"
#include "finish.h"

namespace lifecycle {
namespace core {

enum State : int { kInert, kRunning, kStopping, kDone };
extern std::atomic<int> g_state;
extern std::atomic<bool> g_gave_up;  // a waiter gave up on this image's stop

const config::Config& cfg();
finish::Context& ctx();
pid_t raw_getpid();
// A vfork child shares the parent's memory: it neither stops nor profiles.
bool vfork_child();

// The first stop path wins: RUNNING -> STOPPING, and what the stop reports;
// stem, if given, is what it writes under (only the winner sets it: the
// stop thread reads it). Signal-safe without stem.
bool claim_stop(const char* how, const std::string* stem = nullptr);
void mark_done();
// Waits for the stop, at most until its deadline; past it, says so once,
// removes what is half-written, and lets the caller go on. Signal-safe.
void wait_done();

// fatal_stop.cc's, for lifecycle.cc: a new image's retries (and its count
// of deferrals) start afresh;
// a fork child has none due; a thread in its teardown.
void reset_fatal_retries();
void fatal_after_fork();
// After a normal stop: a fatal signal deferred and not yet acted on ends
// the process now, as it would have ended it before.
void die_of_deferred();
void fatal_thread_ending();

}  // namespace core
}  // namespace lifecycle
