// errline: the stderr channel; see errline.h.
#include "errline.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "sigmask.h"
#include "sys.h"

namespace errline {
namespace {

struct State {
  std::atomic<int> dup;  // our duplicate, or -1 (0 before init: see init)
  dev_t dev;
  ino_t ino;
  std::atomic<bool> known;      // fd 2 was open at setup
  std::atomic<bool> detached;
};
State g;  // zero-initialised: no dynamic initialiser (DESIGN "Globals")

bool same_file(int fd) {
  struct stat st;
  return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == g.dev && st.st_ino == g.ino;
}

// A write to a closed pipe sends SIGPIPE to the writing thread: blocked
// around ours, and taken back if ours raised it, so the program's status
// and handlers never see it.
void write_quietly(int fd, const char* buf, size_t len) {
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigemptyset(&old);
  sigmask::unfiltered(SIG_BLOCK, &pipe_only, &old);
  sigemptyset(&pending);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  int saved = errno;
  if (!sys::write_all(fd, buf, len) && errno == EPIPE && !was_pending && !sigismember(&old, SIGPIPE)) {
    struct timespec zero = {0, 0};
    siginfo_t si;
    syscall(SYS_rt_sigtimedwait, &pipe_only, &si, &zero, 8);
  }
  errno = saved;
  sigmask::unfiltered(SIG_SETMASK, &old, nullptr);
}

int top_free_fd() {
  struct rlimit rl;
  int lim = 1024;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (1u << 20))
    lim = int(rl.rlim_cur);
  for (int fd = lim - 1; fd > lim - 64 && fd > 2; --fd)
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) return fd;
  return lim / 2 > 2 ? lim / 2 : 3;
}

}  // namespace

void init() {
  g.dup.store(-1);
  struct stat st;
  if (fstat(2, &st) != 0) return;  // started without stderr: we stay silent
  g.dev = st.st_dev;
  g.ino = st.st_ino;
  g.known.store(true);
}

void line(const char* text) {
  char buf[4096];
  static const char kPrefix[] = "# profshim: ";
  size_t n = strlen(text);
  if (n > sizeof buf - sizeof kPrefix - 1) n = sizeof buf - sizeof kPrefix - 1;
  memcpy(buf, kPrefix, sizeof kPrefix - 1);
  memcpy(buf + sizeof kPrefix - 1, text, n);
  size_t len = sizeof kPrefix - 1 + n;
  buf[len++] = '\n';
  if (!g.known.load()) {
    if (g.dup.load() == 0) write_quietly(2, buf, len);  // before init (setup errors): fd 2 as it is
    return;
  }
  int d = g.dup.load();
  if (d >= 0 && same_file(d))
    write_quietly(d, buf, len);
  else if (same_file(2))
    write_quietly(2, buf, len);
}

void before_fd2_goes() {
  if (!g.known.load() || g.detached.load() || g.dup.load() >= 0 || !same_file(2)) return;
  int d = fcntl(2, F_DUPFD_CLOEXEC, top_free_fd());
  if (d >= 0) g.dup.store(d);
}

void before_close(unsigned lo, unsigned hi) {
  if (!g.known.load(std::memory_order_relaxed)) return;
  int d = g.dup.load();
  if (d >= 0 && unsigned(d) >= lo && unsigned(d) <= hi) g.dup.store(-1);  // the program's to close
  if (lo > 2 || hi < 2) return;
  before_fd2_goes();
  d = g.dup.load();
  if (d >= 0 && unsigned(d) >= lo && unsigned(d) <= hi) {  // it closes everything: nowhere to keep one
    syscall(SYS_close, d);
    g.dup.store(-1);
  }
}

void detaching() { g.detached.store(true); }

}  // namespace errline
