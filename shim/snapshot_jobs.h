// snapshot_jobs: what the snapshot worker does (snapshot.h): a numbered
// set, a heap peak, a memory row, and the stop's settling of the heap-peak
// file. The worker's thread runs every one of them, one at a time; the stop
// calls settle() only once the worker is halted. Not signal-safe.
#pragma once
#include <stdint.h>

#include <string>

#include "config.h"
#include "engine.h"
#include "summary.h"

namespace snapshot_jobs {

// An image begins (setup, a fork child): nothing written, numbering unknown.
void begin(const config::Config* cfg, uint64_t start_real_ns);

// A numbered set, asked by trigger ("signal", "trigger file", "interval").
void numbered(const char* trigger);
// A heap peak was asked (peak.h): a dump, and a file when due. Returns
// when the worker should look again (CLOCK_MONOTONIC ns), 0 if it need not.
uint64_t peak(uint64_t now);
// A row of NAME.mem.tsv.
void mem_row(const char* event);
// The trigger file, polled: whether it was touched since the last look
// (then it is consumed).
bool trigger_touched(uint64_t image_start_real_s);

// The stop's part (snapshot.h, at_stop).
void settle(const engine::Part* final_heap, summary::Figures* f);

}  // namespace snapshot_jobs
