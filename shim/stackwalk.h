// stackwalk: the walks of a thread's stack that the shim needs: the sampler's
// (from the context a signal interrupted) and the stop's safety checks (is
// this thread inside code whose locks the stop would need?). With libgcc's
// unwinder (_Unwind_Backtrace), whose lookup of each frame's unwind
// information is the shim's (fde_lookup.h: glibc's _dl_find_object or the
// shim's table of objects, lock-free), sharing no state with a program's
// own libunwind (whose caches' mutex a sampling signal could find held on
// its own thread).
//
// Signal-safe once prime() has run, and nothing here allocates.
#pragma once
#include <pthread.h>
#include <stdint.h>
#include <string>

namespace stackwalk {

// Marks a frame whose address is an interrupted instruction (the leaf of a
// signal's context, or the frame a signal trampoline interrupted), not a
// return address: it is looked up as it is, not minus one.
constexpr uint64_t kExact = 1ull << 63;
inline uint64_t pc_of(uint64_t frame) { return frame & ~kExact; }
// The address to symbolize for a recorded frame: inside the instruction.
inline uint64_t lookup_addr(uint64_t frame) { return (frame & kExact) ? pc_of(frame) : frame - 1; }

// At setup: the unwinder's one-time set-up done outside any handler, and
// the calling thread's stack bounds noted.
void prime();
// The calling thread's stack's bounds, so a handler near the bottom of a
// small stack takes the interrupted instruction only (at setup, the main
// thread's).
void note_thread_stack();
// A thread the shim starts: its stack as the attributes its creator passes
// say (taken in the creator), and its bounds from them in its first
// instruction. pthread_getattr_np there would allocate: the thread's first
// call into jemalloc, which then creates the thread's arena, and crashes
// when a memory limit refuses it.
struct ThreadStack {
  uintptr_t lo;  // the program's own memory (pthread_attr_setstack), else 0
  size_t size;
};
ThreadStack stack_of(const pthread_attr_t* attr);
void note_new_thread_stack(const ThreadStack& stack);
// Whether note_thread_stack() ran on this thread (it did not on a thread
// that ran before the shim loaded). Signal-safe.
bool thread_stack_noted();
// The calling thread's stack as noted, [*lo, *hi); false if not noted.
// Signal-safe.
bool thread_stack(uintptr_t* lo, uintptr_t* hi);

// Whether a handler that received this context has too little stack left
// to unwind, or runs on a stack whose bounds the shim does not know. The
// shim's handlers run on the thread's alternate stack (SA_ONSTACK), when it
// has one: the shim's 64 KiB, Go's or BEAM's, or a program's own of 8 KiB.
bool cramped(void* ucontext);
// For a cramped handler: runs fn(arg) on the interrupted stack, below its
// red zone, where the handler would have run without SA_ONSTACK -- only if
// that is a stack the shim knows (the thread's own) with room for a walk.
// False, fn not run, on any other (a goroutine's, a coroutine's): then the
// caller takes the interrupted instruction only. From a handler that
// blocks every signal: another landing on the alternate stack's top would
// overwrite this one's frames there.
bool elsewhere(void* ucontext, void (*fn)(void*), void* arg);
// Whether the handler that received this context runs on the alternate stack.
bool on_alt_stack(void* ucontext);

// A stack of the shim's own (stack.cc) that the calling thread runs on
// now, so that walks there know their room; the previous one, to put back.
struct Bounds {
  uintptr_t lo, hi;
};
Bounds use_stack(Bounds b);

// A thread the program gives a small stack of a size it chose: glibc
// carves every thread's static TLS out of that stack, the shim's (2.7 KiB,
// most of it jemalloc's) included, and a sampled thread also takes the
// sampling signal's frame there (3.4 KiB on AVX-512, 11.7 KiB with AMX).
// Returns attributes for a stack that much bigger (in *copy, which is not
// to be destroyed: it shares the program's attributes' cpuset), or attr
// itself when the stack is the program's own memory or large (1 MiB or
// more, the default's size when none is set).
const pthread_attr_t* with_room(const pthread_attr_t* attr, pthread_attr_t* copy, bool sampled);

// The stack of the context a signal handler received (its ucontext): frames
// leaf first, the leaf and every frame a signal trampoline interrupted
// marked kExact, the trampolines themselves left out. At least one frame
// (the interrupted instruction) even when the unwinder cannot step or there
// is no room for it. *cut (if given): the walk stopped at a frame it could
// not trust (stackwalk_guard.h), so the stack is shorter than the thread's.
int from_signal(void* ucontext, uint64_t* frames, int max, bool* cut = nullptr);

// The calling thread's own stack, from the function that calls this
// outwards: in the program's normal course or inside its signal handler
// (a signal trampoline is left out, the frame it interrupted marked
// kExact). room_here() first: the walk wants ~5 KiB of stack, and the
// caller's frames array its own.
int here(uint64_t* frames, int max);
// Whether there is room to walk here: false near the bottom of a small
// thread stack, on an alternate signal stack with little left, and on any
// stack whose bounds the shim does not know (a program's fiber stack).
bool room_here();

// Address ranges of code that may hold locks the stop needs: the allocator
// (jemalloc's code, sections profshim_alloc and profshim_heapprof) and the
// dynamic loader. Filled
// by note_unsafe_code(). The rest of the shim's code is not among them:
// what of it holds something the stop needs says so (Holding).
//
// What a program thread may hold that a stop needs, lock by lock:
//  - jemalloc's arena, bin, extent and prof mutexes: held only by frames in
//    profshim_alloc or profshim_heapprof (jemalloc's code and the shim's
//    malloc-family functions);
//    the heap profile's hooks that jemalloc calls run under such frames.
//  - the loader's locks (dl_load_lock, dl_load_tls_lock): held inside ld.so;
//    its list lock, held also in a dl_iterate_phdr callback (program code):
//    asked of the lock itself (glibc_compat::holds_loader_lock).
//  - libdw being loaded (symbolize_libdw.cc: a flag others wait on up to 2 s),
//    a dlclose's record (unload.cc: a helper thread joined, using libdw),
//    the loader's list lock (taken by a walk for a library the objects'
//    table lacks, before glibc 2.35: glibc_compat.h) and a
//    wait being recorded (waits.cc: the table's log is read up to a slot
//    claimed but not yet written): held under a Holding.
// Nothing else of the shim holds a lock a program thread could be stopped
// in: own_signal's view lock is taken with every signal blocked; the
// snapshot worker's busy word is the worker's, and the stop waits for it
// with a bound; the sampler writes its table in a handler that blocks
// every signal, as all the shim's own handlers do. So a thread in a wrapper, in the thread
// start trampoline, in the wait profile's recording or in the shim's
// signal bookkeeping holds nothing a stop waits for, and is stopped or
// parked there as it would be in the program's own code.
void note_unsafe_code();
bool in_unsafe_code(uint64_t pc);
// While one lives, the calling thread holds something of the shim's that a
// stop on this thread would wait for (libdw half loaded, a dlclose's
// record under way, libgcc's unwinder inside a walk, a wait being
// recorded): a fatal signal is
// deferred, a freeze request declined, as inside the allocator.
// (Inline: code outside the walks, which the unit tests link alone, marks
// itself too.)
inline thread_local int t_holding = 0;
struct Holding {
  Holding() { ++t_holding; }
  ~Holding() { --t_holding; }
  Holding(const Holding&) = delete;
  Holding& operator=(const Holding&) = delete;
};
inline bool holding() { return t_holding > 0; }
// While a thread is parked on its way out of the program's allocator
// (freeze::after_alloc): the allocator's frames on its stack hold nothing.
inline thread_local bool t_left_alloc = false;
struct LeftAlloc {
  LeftAlloc() { t_left_alloc = true; }
  ~LeftAlloc() { t_left_alloc = false; }
};
// Whether the context a signal interrupted is inside such code, in any of
// its first frames (a thread inside malloc, or inside a lock jemalloc took),
// or its thread is Holding.
// from_sigwait: the signal was raised by the shim's own code in a signal
// wait's wrapper (a fatal signal's retry taken there): only the frames from
// that wrapper (section profshim_sigcall) on count.
bool interrupted_in_unsafe_code(void* ucontext, bool from_sigwait = false);
// Whether this thread, inside a wrapper of a blocking call, may be parked
// there: none of its frames beyond the wrapper is inside such code.
bool may_park_here();
// The same, for a thread returning from the program's allocator: none of
// its frames beyond the allocator's own is inside such code.
bool may_park_leaving_alloc();
// Whether the stop a signal interrupted (its watchdog's) is inside code
// whose locks the program needs once the stop is left: the allocator, the
// dynamic loader or libc, called from the shim's own code (or, with no
// frame of the shim's found, maybe so).
bool holds_program_locks(void* ucontext);
// Whether the calling thread runs inside a signal handler (a program's
// handler that calls exit(), say), and whether that handler interrupted such
// code.
enum Context { kNotInHandler, kHandler, kHandlerOverUnsafeCode };
Context calling_context();

}  // namespace stackwalk
