// errline: the stderr channel; see errline.h.
#include "errline.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "sandbox.h"
#include "sigmask.h"
#include "sys.h"

namespace errline {
namespace {

// Zero-initialised, so every field's zero must mean "nothing of ours": a
// zero that meant descriptor 0 had the inert shim (init never runs) close
// the program's stdin at setsid.
struct State {
  std::atomic<int> held;  // our duplicate's number plus one; 0: none
  dev_t dev;
  ino_t ino;
  std::atomic<bool> inited;     // init ran: before it (setup errors), lines go to fd 2 as it is
  std::atomic<bool> known;      // fd 2 was open at setup
  std::atomic<bool> detached;
  std::atomic<bool> no_pipes;          // a fork child's image: keeps no duplicate of a pipe
  std::atomic<uint64_t> deadline_ns;   // the stop's (CLOCK_MONOTONIC), 0: none yet
  std::atomic<int> writers;            // line()s using the duplicate now
};
State g;  // zero-initialised: no dynamic initialiser (DESIGN "Globals")

bool same_file(int fd) {
  struct stat st;
  return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == g.dev && st.st_ino == g.ino;
}

int held() { return g.held.load() - 1; }

// Takes our duplicate out of the state and closes it, but only if the
// number still holds what we made (the original stderr, close-on-exec): a
// program that closed it behind our back (a raw syscall, a library's own
// loop) may have been given that number again, and it is the program's.
void close_held(int d) {
  if (d < 0 || !same_file(d)) return;
  int flags = fcntl(d, F_GETFD);
  if (flags >= 0 && (flags & FD_CLOEXEC)) syscall(SYS_close, d);
}

void let_go() { close_held(g.held.exchange(0) - 1); }

// A write to a closed pipe sends SIGPIPE to the writing thread: blocked
// around ours, and taken back if ours raised it (and none was pending
// before), so the program's status and handlers never see it.
// A pipe nobody reads (a parent that only reads stdout, a full journal)
// would hold the write, and the stop with it: wait for room at most until
// the stop's deadline, else drop the line.
bool room_to_write(int fd) {
  uint64_t deadline = g.deadline_ns.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t now = sys::now_ns(CLOCK_MONOTONIC);
    int wait_ms = 0;
    if (deadline > now) wait_ms = int((deadline - now) / 1000000) + 1;
    else if (deadline == 0) wait_ms = 1000;
    struct pollfd p = {fd, POLLOUT, 0};
#ifdef SYS_poll
    int r = int(syscall(SYS_poll, &p, 1, wait_ms));
#else  // aarch64: ppoll only (sandbox.cc probes the one used)
    struct timespec ts = {wait_ms / 1000, (wait_ms % 1000) * 1000000L};
    int r = int(syscall(SYS_ppoll, &p, 1, &ts, nullptr, 0));
#endif
    if (r > 0) return !(p.revents & POLLNVAL);
    if (r == 0 || errno != EINTR) return r < 0;  // a poll that fails for another reason: just write
  }
}

void write_quietly(int fd, const char* buf, size_t len) {
  if (!room_to_write(fd)) return;
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigemptyset(&old);
  sigmask::unfiltered(SIG_BLOCK, &pipe_only, &old);
  sigemptyset(&pending);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  int saved = errno;
  // Taken back whatever the caller's mask: a SIGPIPE left pending under a
  // mask that blocks it would reach the program later, or the next image
  // through an exec (pending signals survive it).
  if (!sys::write_all(fd, buf, len) && errno == EPIPE && !was_pending) {
    struct timespec zero = {0, 0};
    siginfo_t si;
    syscall(SYS_rt_sigtimedwait, &pipe_only, &si, &zero, 8);
  }
  errno = saved;
  sigmask::unfiltered(SIG_SETMASK, &old, nullptr);
}

}  // namespace

std::atomic<uint64_t> g_pipe_since{0};

void init() {
  g.inited.store(true);
  struct stat st;
  if (fstat(2, &st) != 0) return;  // started without stderr: we stay silent
  g.dev = st.st_dev;
  g.ino = st.st_ino;
  g.known.store(true);
}

size_t format(const char* text, char (&buf)[kLineMax]) {
  static const char kPrefix[] = "# profshim: ";
  size_t n = strlen(text);
  if (n > sizeof buf - sizeof kPrefix - 1) n = sizeof buf - sizeof kPrefix - 1;
  memcpy(buf, kPrefix, sizeof kPrefix - 1);
  memcpy(buf + sizeof kPrefix - 1, text, n);
  size_t len = sizeof kPrefix - 1 + n;
  buf[len++] = '\n';
  return len;
}

void line(const char* text) {
  char buf[kLineMax];
  size_t len = format(text, buf);
  if (!g.known.load()) {
    if (!g.inited.load()) write_quietly(2, buf, len);  // before init (setup errors): fd 2 as it is
    return;
  }
  // Counted while it uses the duplicate: grace_over() lets it go only
  // when no line is being written through it.
  g.writers.fetch_add(1);
  int d = held();
  if (d >= 0 && same_file(d))
    write_quietly(d, buf, len);
  else if (same_file(2))
    write_quietly(2, buf, len);
  g.writers.fetch_sub(1);
}

bool is_pipe_like(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

// The program's errno is its own: a close(2) that succeeds left EBADF
// behind from the shim's look at its own duplicate.
struct KeepErrno {
  int saved = errno;
  ~KeepErrno() { errno = saved; }
};

void before_fd2_goes() {
  sandbox::OwnCalls own;
  KeepErrno keep;
  if (!g.known.load() || g.detached.load() || held() >= 0 || !same_file(2)) return;
  // A forked child that lets its stderr go and lives on (a daemon that does
  // not call setsid) must not keep its parent's pipe open: a reader of that
  // pipe would wait for its end as long as the child lives.
  if (g.no_pipes.load() && is_pipe_like(2)) return;
  int d = fcntl(2, F_DUPFD_CLOEXEC, sys::top_free_fd());
  if (d < 0) return;
  g.held.store(d + 1);
  // A pipe or socket held open keeps its reader waiting for the end
  // (`x=$(prog 2>&1)` with prog closing its stdio and running on): kept
  // only for a program that ends soon after, as xz and coreutils close
  // stderr on their way out.
  if (is_pipe_like(d)) g_pipe_since.store(sys::now_ns(CLOCK_MONOTONIC));
}

void let_go_pipe() {
  KeepErrno keep;
  if (g.deadline_ns.load() != 0) return;  // the stop has begun: its line goes there
  int h = g.held.load();
  if (h == 0) return g_pipe_since.store(0);
  if (g.writers.load() != 0) return;  // at the next chance
  // Taken out first, then no writer checked: a line() that begins now
  // finds none held (both sides are sequentially consistent).
  if (!g.held.compare_exchange_strong(h, 0)) return;
  if (g.writers.load() != 0) {
    int none = 0;
    // Back, unless the program closed it meanwhile; let go at the next chance.
    g.held.compare_exchange_strong(none, h);
    return;
  }
  g_pipe_since.store(0);
  close_held(h - 1);
}

void let_go_pipe_if_late() {
  uint64_t t = g_pipe_since.load();
  if (t && sys::now_ns(CLOCK_MONOTONIC) - t > kPipeGraceNs) let_go_pipe();
}

void before_close(unsigned lo, unsigned hi) {
  sandbox::OwnCalls own;
  KeepErrno keep;
  if (!g.known.load(std::memory_order_relaxed)) return;
  int d = held();
  if (d >= 0 && unsigned(d) >= lo && unsigned(d) <= hi) g.held.store(0);  // the program's to close
  if (lo > 2 || hi < 2) return;
  before_fd2_goes();
  d = held();
  if (d >= 0 && unsigned(d) >= lo && unsigned(d) <= hi) let_go();  // it closes everything: nowhere to keep one
}

void detaching() {
  KeepErrno keep;
  if (!g.known.load()) return;  // inert, or no stderr: nothing of ours to let go
  g.detached.store(true);
  let_go();  // its parent's pipe, say
}

void forked() {
  KeepErrno keep;
  if (!g.known.load()) return;
  g.no_pipes.store(true);
  int d = held();
  if (d >= 0 && is_pipe_like(d)) let_go();
}

void set_deadline(uint64_t mono_ns) { g.deadline_ns.store(mono_ns, std::memory_order_relaxed); }

}  // namespace errline
