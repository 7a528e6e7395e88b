// fsroot: the root the shim's own paths resolve against; see fsroot.h.
#include "fsroot.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "sys.h"

namespace fsroot {
namespace {

// The descriptor's number plus one; 0: none (zero-initialised, DESIGN "Globals").
std::atomic<int> g_held;

struct At {
  int dir;
  const char* path;
};

// Where the held root is, as the kernel names paths outside the program's
// new root: from the mount namespace's root. A program that started inside
// a chroot of its own (a build root, a test's root) and chroots again sees
// its images in /proc/self/maps as PREFIX/usr/lib/..., PREFIX being the
// first root's place in the namespace; the shim reads those paths and must
// take PREFIX off. Learnt once the chroot is in (before it, the held root
// reads "/"); "" while unknown or where there is none to take.
char g_prefix[1024];
std::atomic<int> g_prefix_state;  // 0 unknown, 1 being written, 2 known

void learn_prefix(int d) {
  char proc[64] = "proc/self/fd/", buf[sizeof g_prefix];
  *sys::put_uint(proc + 13, unsigned(d)) = 0;  // a signal handler may ask: no snprintf
  ssize_t len = ssize_t(syscall(SYS_readlinkat, d, proc, buf, sizeof buf - 1));
  if (len <= 1 || buf[0] != '/') return;  // "/" (no chroot yet, or the namespace's own root) or unreadable
  int unknown = 0;
  if (!g_prefix_state.compare_exchange_strong(unknown, 1)) return;
  memcpy(g_prefix, buf, size_t(len));
  g_prefix[len] = 0;
  g_prefix_state.store(2, std::memory_order_release);
}

// An absolute path from the held root ("/" itself is its "."); anything
// else as the program would resolve it.
At at(const char* path) {
  int d = g_held.load(std::memory_order_acquire) - 1;
  if (d < 0 || !path || path[0] != '/') return {AT_FDCWD, path};
  if (g_prefix_state.load(std::memory_order_acquire) == 0) learn_prefix(d);
  if (g_prefix_state.load(std::memory_order_acquire) == 2) {
    const size_t n = strlen(g_prefix);
    if (strncmp(path, g_prefix, n) == 0 && (path[n] == '/' || path[n] == 0)) path += n;
  }
  while (*path == '/') ++path;
  return {d, *path ? path : "."};
}

}  // namespace

void before_chroot() {
  if (g_held.load() != 0) return;  // the root the program started with is kept
  int saved = errno;
  int fd = int(syscall(SYS_openat, AT_FDCWD, "/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (fd >= 0) {
    int high = int(syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, sys::top_free_fd()));
    syscall(SYS_close, fd);
    int none = 0;
    // Two threads chrooting at once: one descriptor is kept.
    if (high >= 0 && !g_held.compare_exchange_strong(none, high + 1)) syscall(SYS_close, high);
  }
  errno = saved;
}

void before_close(unsigned lo, unsigned hi) {
  int d = g_held.load() - 1;
  if (d >= 0 && unsigned(d) >= lo && unsigned(d) <= hi) g_held.store(0);  // the program's to close
}

int open(const char* path, int flags, mode_t mode) {
  At a = at(path);
  return int(syscall(SYS_openat, a.dir, a.path, flags, mode));
}

int stat(const char* path, struct stat* st) {
  At a = at(path);
  return int(syscall(SYS_newfstatat, a.dir, a.path, st, 0));
}

int lstat(const char* path, struct stat* st) {
  At a = at(path);
  return int(syscall(SYS_newfstatat, a.dir, a.path, st, AT_SYMLINK_NOFOLLOW));
}

int access(const char* path, int mode) {
  At a = at(path);
  return int(syscall(SYS_faccessat, a.dir, a.path, mode));
}

int mkdir(const char* path, mode_t mode) {
  At a = at(path);
  return int(syscall(SYS_mkdirat, a.dir, a.path, mode));
}

int unlink(const char* path) {
  At a = at(path);
  return int(syscall(SYS_unlinkat, a.dir, a.path, 0));
}

int rmdir(const char* path) {
  At a = at(path);
  return int(syscall(SYS_unlinkat, a.dir, a.path, AT_REMOVEDIR));
}

int rename(const char* from, const char* to) {
  At a = at(from), b = at(to);
  return int(syscall(SYS_renameat, a.dir, a.path, b.dir, b.path));
}

ssize_t readlink(const char* path, char* buf, size_t size) {
  At a = at(path);
  return ssize_t(syscall(SYS_readlinkat, a.dir, a.path, buf, size));
}

DIR* opendir(const char* path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  DIR* d = fdopendir(fd);
  if (!d) {
    int saved = errno;
    syscall(SYS_close, fd);
    errno = saved;
  }
  return d;
}

}  // namespace fsroot
