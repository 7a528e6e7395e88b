// errline: the shim's one channel to the stderr the process started with,
// for its summary and error lines ("# profshim: ...").
//
// Programs close or replace fd 2 before they end (xz closes it and then
// exits; a daemon points it at /dev/null and runs on), so at the moment the
// program first closes or replaces fd 2 -- the close/dup2/dup3/close_range
// wrappers tell us -- the shim keeps a close-on-exec duplicate of it, placed
// at the top of the descriptor limit where a program's own descriptors
// rarely reach. Not when the program detaches (setsid, daemon): then the
// original stderr is let go, so that a parent reading that pipe to its end
// is not kept waiting. Before that moment no descriptor of the shim's exists
// at all. The program closing the duplicate's number (closefrom, a loop over
// every fd) closes it for real and the shim forgets it: the shim never
// closes a descriptor it does not hold, nor a number that no longer holds
// its duplicate (closed by a raw syscall and given to the program again).
// Inert (init never ran), nothing here touches a descriptor but line(),
// which writes a setup error to fd 2 as it is.
//
// line() is signal-safe and never raises SIGPIPE in the program: a closed
// pipe costs the line, not the process.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <atomic>

namespace errline {

// At setup (active): remembers what fd 2 is (device, inode). Until then,
// lines go to fd 2 as it is.
void init();
// Writes "# profshim: " + text + "\n" with one write.
void line(const char* text);
// That line in buf (text cut to fit kLineMax), and its length: the one shape
// of a line, on stderr or in PROFILE_LOG's file (summary_log.h).
constexpr size_t kLineMax = 4096;
size_t format(const char* text, char (&buf)[kLineMax]);

// From the fd wrappers, before the call: fd 2 is about to be closed or
// replaced; fds [lo, hi] are about to be closed.
void before_fd2_goes();
void before_close(unsigned lo, unsigned hi);
// The program detaches from its session's terminal or pipe: a duplicate
// held is let go, and none is taken from now on.
void detaching();
// In a fork child: a duplicate of a pipe or socket is let go, and none is
// taken (errline.cc, before_fd2_goes).
void forked();
// A duplicate of a pipe or socket keeps its reader waiting for the end
// (`x=$( { prog & } 2>&1 | cat )` with prog closing its stdio and running
// on): it is kept only for a program that ends soon after, as xz and
// coreutils close stderr on their way out. It is let go at the program's
// next blocking call (a wrapper of the wait profile's) or at a CPU sample
// 200 ms after the close; the line is then not written. No timer of the
// shim's: its signal would cut the program's sleep or poll short (EINTR).
// g_pipe_since: when such a duplicate was taken (CLOCK_MONOTONIC ns), 0: none.
extern std::atomic<uint64_t> g_pipe_since;
constexpr uint64_t kPipeGraceNs = 200ull * 1000 * 1000;
void let_go_pipe();
inline void before_wait() {
  if (__builtin_expect(g_pipe_since.load(std::memory_order_relaxed) != 0, 0)) let_go_pipe();
}
void let_go_pipe_if_late();
inline void at_sample() {
  if (__builtin_expect(g_pipe_since.load(std::memory_order_relaxed) != 0, 0)) let_go_pipe_if_late();
}
// The stop's deadline: a line waits for room in a full pipe at most until
// then (CLOCK_MONOTONIC ns).
void set_deadline(uint64_t mono_ns);

}  // namespace errline
