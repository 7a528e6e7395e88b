// sys: raw syscalls and the stderr channel; see sys.h.
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sys {
namespace {

struct Orig {
  int fd = -1;       // our duplicate, or -1
  dev_t dev = 0;
  ino_t ino = 0;
  bool known = false;  // fd 2 was open at start
  int misses = 0;      // consecutive polls that found fd 2 gone or replaced
};
Orig g_err;

bool same_file(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_dev == g_err.dev && st.st_ino == g_err.ino;
}

}  // namespace

pid_t gettid() { return pid_t(syscall(SYS_gettid)); }

uint64_t now_ns(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool write_all(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

std::string read_file(const char* path) {
  std::string out, buf(65536, '\0');
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  for (ssize_t r; (r = read(fd, &buf[0], buf.size())) > 0;) out.append(buf.data(), size_t(r));
  close(fd);
  return out;
}

void futex_wait(volatile uint32_t* word, uint32_t expect, uint64_t timeout_ns) {
  struct timespec ts = {time_t(timeout_ns / 1000000000ull), long(timeout_ns % 1000000000ull)};
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expect, &ts, nullptr, 0);
}

void futex_wake(volatile uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, nullptr, nullptr, 0);
}

void stderr_init() {
  struct stat st;
  if (fstat(2, &st) != 0) return;  // started without stderr: we stay silent
  g_err.dev = st.st_dev;
  g_err.ino = st.st_ino;
  g_err.known = true;
  // High, so that a program's dup2 onto small numbers or a closefrom(3)
  // loop is less likely to hit it; verified by dev/ino before every use.
  struct rlimit rl;
  int floor = 512;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur <= rlim_t(floor) + 16)
    floor = int(rl.rlim_cur / 2);
  g_err.fd = fcntl(2, F_DUPFD_CLOEXEC, floor);
}

void stderr_poll() {
  if (g_err.fd < 0) return;
  if (same_file(2)) {
    g_err.misses = 0;
    return;
  }
  // Two polls a second apart: a program that closes fd 2 and exits (xz)
  // still gets its summary; a daemon that detached releases the pipe.
  if (++g_err.misses >= 2) {
    close(g_err.fd);
    g_err.fd = -1;
  }
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
  if (!g_err.known) {
    // Called before stderr_init (setup errors): fd 2 as it is now.
    write_all(2, buf, len);
    return;
  }
  if (g_err.fd >= 0 && same_file(g_err.fd)) {
    write_all(g_err.fd, buf, len);
  } else if (same_file(2)) {
    write_all(2, buf, len);
  }
}

}  // namespace sys
