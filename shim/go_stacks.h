// go_stacks: a Go program's stack walk across Go's own stack switches.
//
// The runtime runs part of its work on each thread's scheduler stack (g0):
// the garbage collector's assists and marking, a goroutine's creation, a
// stack's growth, all entered through runtime.systemstack or
// runtime.morestack from a goroutine whose frames stay on its own stack; so
// does C called through cgo (runtime.asmcgocall). Go's traceback (and so Go's own profiler) goes on from there to that
// goroutine's frames: an allocation's GC assist is charged to the code that
// allocated. This walk does the same, with the offsets of the fields it
// reads (g.m, m.curg, g.sched) taken from runtime.systemstack's own
// instructions, which load exactly those fields, at setup: a Go release whose
// code differs is walked as before, to the switch and no further.
#pragma once
#include <stdint.h>

namespace go_stacks {

// At setup, once Go's tables are loaded (go_unwind::load) and the
// goroutine's TLS slot is known (go_runtime::current_g).
void learn();
// The Go walk (go_unwind::walk) from pc and sp inside [lo, hi), on into the
// goroutine's stack where it stopped at runtime.systemstack or
// runtime.morestack on the scheduler's stack. Signal-safe.
int walk(uint64_t pc, uintptr_t sp, uintptr_t lo, uintptr_t hi, uint64_t* frames, int n, int max);
// After the unwinder's walk of C code ended at the return address ret, for
// which it found no unwind information: if ret is inside
// runtime.asmcgocall (C called from Go through cgo), appends it and the
// calling goroutine's frames; only when the goroutine's are found.
// Signal-safe.
int after_c(uint64_t ret, uint64_t* frames, int n, int max);
unsigned after_c_frame(void** frames, unsigned n, unsigned max);

}  // namespace go_stacks
