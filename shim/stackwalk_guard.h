// stackwalk_guard: the checks that keep the shim's walks from reading memory
// that holds no frame, for the walks in stackwalk.cc only.
//
// libgcc's unwinder trusts each frame's unwind information. That is wrong
// for a few instructions at a time where code moves the stack pointer to
// another frame: the program's own unwinder installing a landing pad's
// context (libgcc_s's _Unwind_Resume and _Unwind_RaiseException end with
// rbp restored, rsp set, then a jump), libunwind's resume, longjmp. A sample
// taken there is unwound to the landing pad as if it were a return address,
// that address minus one lies in another part of the function (its
// epilogue, after a `ret`), and the unwinder reads a "return address" that
// is any value at all -- then libgcc, finding no unwind information for it,
// reads the code at that address to look for a signal trampoline. Both
// checks here stop the walk before such a read. Signal-safe.
#pragma once
#include <stdint.h>
#include <unwind.h>

namespace stackwalk {

// _Unwind_Backtrace(fn, arg), except that a frame whose address has no
// unwind information ends the walk (fn is not called for it) instead of
// having its code read. Returns false when it ended so.
bool guarded_backtrace(_Unwind_Trace_Fn fn, void* arg);
// After a walk that ended so: the address looked up (a return address less
// one), the first the walk could not go past.
uint64_t missing_unwind_info();
// The return address the kernel gave the shim's signal handler: the
// sigreturn trampoline, whose code the unwinder may read where it has no
// unwind information for it (qemu-user's has none; the kernel's vDSO and
// glibc's __restore_rt have). Signal-safe.
void note_trampoline(const void* ra);

// Whether ip, reached as a return address, is one: the instruction before it
// is a call, or ip is a signal trampoline (the handler "returns" into it).
// A landing pad that a sample saw as the caller of the unwinder is not.
// func: where the unwind information that covers ip - 1 begins (0 if not
// known): the bytes read lie between it and ip.
bool after_call(uint64_t ip, uint64_t func);

}  // namespace stackwalk
