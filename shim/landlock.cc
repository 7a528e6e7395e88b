// landlock: see landlock.h.
#include "landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "image.h"
#include "lifecycle.h"
#include "symbolize_cache.h"
#include "sys.h"

namespace landlock {

namespace {
// Whether the sandbox denies opening path with flags (EACCES is Landlock's
// answer; any other failure is the stop's to meet and report as usual).
bool denied(const char* path, int flags) {
  const int fd = int(syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC, 0600));
  if (fd < 0) return errno == EACCES;
  close(fd);
  // The stop's rename takes its temporary away as well.
  return (flags & O_CREAT) && unlink(path) != 0 && errno == EACCES;
}
}  // namespace

void after_restrict_self() {
  // (A vfork child shares the parent's memory, not its domain.)
  if (!lifecycle::profiling() || lifecycle::in_vfork_child()) return;
  symbolize::cache::note_sandboxed();
  const int saved = errno;
  // The stop reads its own maps and makes new files in PROFILE_DIR: the
  // probe is a file of its own name there, removed at once.
  const std::string probe = lifecycle::profile_dir() + "/.profshim-landlock." + std::to_string(sys::gettid());
  const char* what = denied("/proc/self/maps", O_RDONLY) ? "reading /proc/self/maps"
                     : denied(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL) ? "new files in PROFILE_DIR"
                                                                            : nullptr;
  if (what) {
    image::mark_sandboxed();
    char why[160];
    snprintf(why, sizeof why, "the program's Landlock sandbox (landlock_restrict_self) forbids %s", what);
    lifecycle::sandboxed(why, true);
  }
  errno = saved;
}

}  // namespace landlock
