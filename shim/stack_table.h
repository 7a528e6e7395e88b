// stack_table: the CPU profiler's samples, one entry per (thread, stack)
// with its expirations and CPU, in mmap'd memory; and the names of the
// threads, by serial. add() runs in the sampling signal handler: it takes no
// lock and allocates nothing (open addressing, entries published with a
// state word; the stacks' PCs in an arena). Entries are also logged in the
// order they were published, so that a dlclose looks only at what is new
// and a snapshot finds each entry's values at the previous one by its place.
// Internal to the sampler (sampler.h is the interface).
#pragma once
#include <stdint.h>

#include <string>

#include "sampler.h"

namespace stack_table {

// Fresh, zeroed tables (at start and in a fork child); false with *err.
bool map(std::string* err);
void unmap();
bool mapped();

// Adds count expirations and nanos of CPU to (serial, stack): a reference
// to the entry for add_to(), or 0 if the table had no room (then dropped).
// Signal-safe.
uint32_t add(const uint64_t* pcs, uint32_t n, int32_t tid, uint32_t serial, uint64_t count, uint64_t nanos);
void add_to(uint32_t ref, uint64_t count, uint64_t nanos);
// Counts what is lost: periods, and their CPU.
void drop(uint64_t count, uint64_t nanos);
uint64_t dropped();
uint64_t dropped_nanos();

// A thread's name (up to 15 bytes) by its serial; "" if none. record_name
// is signal-safe.
void record_name(uint32_t serial, int32_t tid, const char* name);
std::string name(uint32_t serial);

// sampler::for_each and sampler::for_each_since.
void for_each(void (*fn)(const sampler::Stack&, void*), void* arg);
void for_each_since(uint64_t* cursor, void (*fn)(const sampler::Stack&, void*), void* arg);

}  // namespace stack_table
