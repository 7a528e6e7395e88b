// go_unwind: a goroutine's frames, from Go's own tables (.gopclntab); see
// go_unwind.cc. go_runtime.cc finds the table at setup.
#pragma once
#include <stdint.h>

namespace go_unwind {

// The executable's .gopclntab, as mapped. False if its format is not one
// this walker reads (the walk then finds no Go function).
bool load(const void* pclntab, uint64_t size);
// Whether pc is inside a Go function. Signal-safe.
bool in_go(uint64_t pc);
// From the interrupted Go function at pc with stack pointer sp, appends
// its callers' return addresses to frames[n..max) while each lies inside
// [lo, hi) and is a Go function's; returns the new count. Signal-safe.
int walk(uint64_t pc, uintptr_t sp, uintptr_t lo, uintptr_t hi, uint64_t* frames, int n, int max);

}  // namespace go_unwind
