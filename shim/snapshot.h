// snapshot: the shim's worker while the program runs. It writes, with the
// same writer as the stop (finish.h):
//  - numbered sets NAME.<seq>.{cpu,heap}.pprof, asked by a signal
//    (PROFILE_SNAPSHOT_SIGNAL), the trigger file NAME.snapshot (polled once
//    a second) or an interval (PROFILE_INTERVAL); the CPU of each covers
//    the time since the previous one; at most PROFILE_SNAPSHOT_KEEP sets
//    stay on disk, the oldest removed first;
//  - NAME.heap-peak.pprof, replaced each time the heap passes its high-water
//    mark (peak.h has the rule), rate-limited: a dump at most every 100 ms
//    (or ten times what the last took), a file at most every second (or ten
//    times what the last took), the largest dump since the last file is the
//    one written;
//  - NAME.mem.tsv rows (memlog.h).
//
// A thread of the shim's own (shim_thread.h, named "profshim-snap"): the
// program's threads only ask (a signal handler sets a flag, the allocation
// path a flag, both wake a futex) and never wait for it; what they can wait
// on is jemalloc's profiler locks while a heap dump runs. It exists only
// when something needs it: from setup when an interval, a signal, the
// trigger file or memory rows are asked for; otherwise from the first heap
// peak check (past PROFILE_PEAK_FLOOR and PROFILE_PEAK_AFTER), if ever.
// NAME is the image's file stem as it runs (the root process's: NAME).
#pragma once
#include <stdint.h>

#include <string>

#include "config.h"
#include "engine.h"
#include "summary.h"

namespace snapshot {

// At setup, after the engines: the heap-peak hook (with the heap profiled
// and a floor), and the worker now if a feature needs it resident. False
// with *err if either cannot be had.
bool setup(const config::Config* cfg, uint64_t start_mono_ns, std::string* err);
// A fork child: a new image with none of the parent's work; its own worker
// if one is needed resident.
void after_fork_in_child(uint64_t start_mono_ns);
// An exec that failed: the image goes on, with its worker if it had one.
void resume();

// Around a call that needs the process single-threaded (unshare of a user
// or mount namespace, setns; hooks_fd.cc): the worker, if it runs, ends
// first (its job done, at most 1 s, its thread gone), and starts again
// after. Not from a signal handler.
struct Apart {
  Apart();
  ~Apart();
  bool paused;
};

// The snapshot signal arrived (signal context): a snapshot soon.
void on_signal();

// A stop: the worker's work in progress finishes and it ends; waited for
// at most half the time left to deadline_mono_ns. True if no job runs now
// (none will after): the worker let go in time, or there is none.
// Signal-safe.
bool halt(uint64_t deadline_mono_ns);
// At the stop, after its set is written: the heap-peak file kept only if
// its in use exceeds the final heap profile's by more than peak::kGrowth
// (else the final profile says the same, later) and removed otherwise; a
// last row of NAME.mem.tsv if there is one; the summary's figures.
void at_stop(const engine::Part* final_heap, summary::Figures* f);

// Whether the calling thread is the worker, and that it crashed outside
// any job (its allocator's set-up): the worker alone ends.
bool on_worker();
void worker_crashed();

}  // namespace snapshot
