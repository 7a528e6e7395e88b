// go_runtime: what the shim needs to know of a Go program (one linked with
// cgo, whose threads are glibc's, so that LD_PRELOAD loads the shim at all;
// docs/RUNTIMES.md).
//
// Its normal end is no call the shim can interpose: runtime.exit (return
// from main.main, os.Exit, a panic, log.Fatal) is an exit_group system call
// of its own. setup() rewrites that function's first instructions, in the
// executable's text as mapped, into a jump to the shim: the stop runs there,
// on a stack of the shim's, then the same system call with the same status.
//
// Its goroutines run on stacks of Go's heap, which the shim's unwinder
// knows nothing of: the goroutine a thread runs is read from Go's TLS slot
// (runtime.tlsg), and its stack's bounds from the goroutine itself, for the
// frame-pointer walk (Go code keeps frame pointers, and has no .eh_frame).
#pragma once
#include <stdint.h>

namespace go_runtime {

// The main executable carries Go's build note (cheap: its program headers
// are in memory).
bool detect();
// In setup, for a Go executable: finds runtime.exit and runtime.tlsg in the
// executable's symbol table and installs the jump. False with *why set when
// the exit cannot be caught (no symbol table, code not as expected, the
// text not writable); the shim profiles on and says so.
bool setup(uint64_t stop_timeout_ms, const char** why);
// Whether this is a Go program (detect() said so at setup).
bool is_go();
// Whether pc lies in an object that carries Go's build note: a Go library
// (c-shared) in a program that is not Go's. Signal-safe.
bool in_go_object(const void* pc);
// The goroutine this thread runs now (its g, from Go's TLS slot), or its
// scheduler's; 0 if it never ran Go code or the slot is unknown.
// Signal-safe.
uintptr_t current_g();
// Whether sp is on the goroutine stack this thread runs now: its bounds.
// Signal-safe: reads the thread's TLS and the goroutine's first two words.
bool goroutine_stack(uintptr_t sp, uintptr_t* lo, uintptr_t* hi);

}  // namespace go_runtime
