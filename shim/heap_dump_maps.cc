// heap_dump_maps: jemalloc's calls to open() and creat(), renamed to these
// in the build's copy of Debian's archive (Makefile). Its creat() of the
// shim's dump name is the memfd heap.cc dumps into (heap.h, kDumpName).
// Every heap dump copies the process's
// maps in (prof_sys.c's prof_dump_maps, no option turns it off): the dump's
// reader stops where they begin (heap_dump.cc), and the stop has read them
// already. The kernel's rendering of a server's few hundred mappings was
// ~0.3 ms of every PostgreSQL backend's stop. jemalloc skips the
// section when the maps cannot be opened; any other open passes through.
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "heap.h"

namespace {

// "/proc/<pid>/maps" and "/proc/<pid>/task/<tid>/maps", what jemalloc asks for.
bool process_maps(const char* path) {
  size_t n = strlen(path);
  return strncmp(path, "/proc/", 6) == 0 && n > 11 && strcmp(path + n - 5, "/maps") == 0;
}

}  // namespace

namespace heap {
thread_local int t_dump_fd;
}

// May run before the shim's constructor (jemalloc boots on the first malloc):
// nothing here depends on the shim's state.
extern "C" __attribute__((visibility("hidden"))) int profshim_je_open(const char* path, int flags, ...) {
  if (process_maps(path)) {
    errno = ENOENT;
    return -1;
  }
  mode_t mode = 0;
  if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {  // glibc's __OPEN_NEEDS_MODE
    va_list ap;
    va_start(ap, flags);
    mode = mode_t(va_arg(ap, int));
    va_end(ap);
  }
  return int(syscall(SYS_openat, AT_FDCWD, path, flags, mode));
}

// The duplicate is jemalloc's to close; the memfd's offset, which they
// share, is the shim's no more: it reads with pread.
extern "C" __attribute__((visibility("hidden"))) int profshim_je_creat(const char* path, mode_t mode) {
  if (path && strcmp(path, heap::kDumpName) == 0) {
    int fd = heap::t_dump_fd - 1;
    if (fd < 0) {
      errno = EBADF;  // never a file of that name in the program's directory
      return -1;
    }
    return int(syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 0));
  }
  return int(syscall(SYS_openat, AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode));
}
