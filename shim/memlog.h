// memlog: NAME.mem.tsv, memory over time: one row per snapshot, per heap
// peak, at PROFILE_MEM_HZ when asked, and one at the stop once the file
// exists. Each row is one append (O_APPEND, one write): a reader sees whole
// rows, and a process killed at any moment leaves every row before it. The
// file is opened for each row and closed again: no descriptor of the
// shim's stays open in the program. Runs on the snapshot worker and the
// stop thread; not signal-safe.
#pragma once
#include <stdint.h>

#include <string>

namespace memlog {

// The figures of one row; the allocator's are read here.
struct Row {
  const char* event;        // "snapshot 3", "peak", "tick", "stop"
  uint64_t heap_peak = 0;   // in use in the heap-peak file as last written, 0: none yet
};

// Appends a row to dir/<stem>.mem.tsv. The first row an image writes
// replaces a file left by an earlier session (older than its start), after
// a header. "" on success, else why not.
std::string append(const std::string& dir, const std::string& stem, const Row& row);
// Whether this image has written a row (the stop adds its own then).
bool used();
// An image begins (setup, a fork child): elapsed time counts from
// start_mono_ns, and its first row checks the file again.
void begin(uint64_t start_mono_ns);

}  // namespace memlog
