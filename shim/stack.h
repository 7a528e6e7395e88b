// stack: runs a function on a stack of the shim's own. A fatal signal's
// handler runs on a 64 KiB alternate stack (ours) or the program's (maybe
// 8 KiB), a program thread's stack may be 64 KiB; the stop (libdw reading a
// line table needs ~150 KiB) runs on a fresh mapping instead.
// Signal-safe: mmap, munmap and a few instructions.
#pragma once
#include <stddef.h>

namespace stack {

// Maps size bytes plus a guard page, runs fn(arg) on them, unmaps them.
// False (fn not run) if the mapping failed.
bool run_on_fresh(size_t size, void (*fn)(void*), void* arg);
// Maps one such stack now, for run_on_fresh to use when its own mapping
// fails: under a memory limit a program that used all it may have leaves
// no room for the stop's stack (ulimit -v, -d; setup calls it then).
bool reserve(size_t size);

// Calls fn(arg) with the stack pointer at top (16-byte aligned) and comes
// back: a handler's way off a cramped stack onto one with room.
void call_on(void* top, void (*fn)(void*), void* arg);

}  // namespace stack
