// only: PROFILE_ONLY's choice of images; see only.h.
#include "only.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace only {
namespace {

int g_answer;  // 0: not decided yet, 1: selected, 2: not

const char* last_part(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// The executable's file name (the kernel's view: a link's target).
bool exe_listed(const config::Config& cfg) {
  static char buf[PATH_MAX];
  long n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return false;
  buf[n] = 0;
  // An executable replaced since it started reads "PATH (deleted)".
  const char* kDeleted = " (deleted)";
  size_t k = strlen(kDeleted);
  if (size_t(n) > k && strcmp(buf + n - k, kDeleted) == 0) buf[n - k] = 0;
  return config::only_lists(cfg.only, last_part(buf));
}

// argv[0], the first string of /proc/self/cmdline.
bool argv0_listed(const config::Config& cfg) {
  static char buf[PATH_MAX];
  int fd = int(syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  if (n <= 0) return false;
  buf[n] = 0;
  return config::only_lists(cfg.only, last_part(buf));
}

}  // namespace

bool selected(const config::Config& cfg) {
  if (cfg.only.empty()) return true;
  int a = __atomic_load_n(&g_answer, __ATOMIC_ACQUIRE);
  if (!a) {
    a = exe_listed(cfg) || argv0_listed(cfg) ? 1 : 2;
    __atomic_store_n(&g_answer, a, __ATOMIC_RELEASE);
  }
  return a == 1;
}

bool selects_exec(const char* only, const char* path, const char* argv0) {
  if (!only || !*only) return true;
  const std::string list(only);
  if ((path && *path && config::only_lists(list, last_part(path))) ||
      (argv0 && config::only_lists(list, last_part(argv0))))
    return true;
  char target[PATH_MAX];
  return path && *path && realpath(path, target) && config::only_lists(list, last_part(target));
}

}  // namespace only
