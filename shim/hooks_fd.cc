// hooks_fd: the descriptor calls that can take fd 2 away (close, dup2,
// dup3, close_range, closefrom, and stdio's fclose and freopen, which close
// inside libc where no interposer sees it) and the calls that detach a process from
// its terminal (setsid, daemon): errline.h keeps the summary's way to the
// original stderr, and never holds a descriptor the program counts on.
// And chroot, before which fsroot.h keeps the root the shim's own paths
// resolve against; the program closing that descriptor's number closes it.
// Inert, errline and fsroot watch nothing and each is one call through.
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#include <linux/close_range.h>
// Older headers (Debian 11's kernel headers, 5.10) lack the flag; the
// kernel's value, as close_range(2) defines it.
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#include <sys/syscall.h>

#include "errline.h"
#include "export.h"
#include "fsroot.h"
#include "glibc_compat.h"
#include "lifecycle.h"
#include "snapshot.h"
#include "real.h"

EXPORT int close(int fd) {
  lifecycle::before_close(unsigned(fd), unsigned(fd));
  return real::close()(fd);
}

EXPORT int dup2(int oldfd, int newfd) noexcept {
  if (oldfd != newfd) {
    lifecycle::before_close(unsigned(newfd), unsigned(newfd));
  }
  return real::dup2()(oldfd, newfd);
}

EXPORT int dup3(int oldfd, int newfd, int flags) noexcept {
  if (oldfd != newfd) {
    lifecycle::before_close(unsigned(newfd), unsigned(newfd));
  }
  return real::dup3()(oldfd, newfd, flags);
}

EXPORT int close_range(unsigned lo, unsigned hi, int flags) noexcept {
  if (!(flags & CLOSE_RANGE_CLOEXEC)) {
    lifecycle::before_close(lo, hi);
  }
  if (real::close_range()) return real::close_range()(lo, hi, flags);
  return int(syscall(SYS_close_range, lo, hi, flags));
}

EXPORT void closefrom(int lo) noexcept {
  lifecycle::before_close(unsigned(lo), ~0u);
  if (real::closefrom()) real::closefrom()(lo);
}

// xz and coreutils end with fclose(stderr); a daemon may freopen it.
EXPORT int fclose(FILE* fp) {
  if (fp && fileno_unlocked(fp) == 2) errline::before_fd2_goes();
  return real::fclose()(fp);
}

EXPORT FILE* freopen(const char* path, const char* mode, FILE* fp) {
  if (fp && fileno_unlocked(fp) == 2) errline::before_fd2_goes();
  return real::freopen()(path, mode, fp);
}

EXPORT FILE* freopen64(const char* path, const char* mode, FILE* fp) {
  if (fp && fileno_unlocked(fp) == 2) errline::before_fd2_goes();
  return real::freopen64()(path, mode, fp);
}

EXPORT pid_t setsid() noexcept {
  pid_t r = real::setsid()();
  if (r >= 0) errline::detaching();
  return r;
}

EXPORT int daemon(int nochdir, int noclose) noexcept {
  errline::detaching();
  return real::daemon()(nochdir, noclose);
}

// A daemon that sandboxes itself: its profiles still go where PROFILE_DIR
// named, its images are still read for symbols (fsroot.h). The root is
// kept even when the call fails: it is then the root the process still
// has, so paths resolve as before, and closing it could pull it from under
// another thread whose chroot found it held and succeeded.
EXPORT int chroot(const char* path) noexcept {
  lifecycle::root_changing();
  return real::chroot()(path);
}

// unshare(CLONE_NEWUSER) and setns() into a user or mount namespace need a
// process of one thread (EINVAL otherwise): the shim's snapshot worker, if
// it runs, ends for the call and starts again after it.
EXPORT int unshare(int flags) noexcept {
  if (!(flags & (CLONE_NEWUSER | CLONE_NEWNS | CLONE_FS))) return real::unshare()(flags);
  snapshot::Apart apart;
  return real::unshare()(flags);
}

EXPORT int setns(int fd, int nstype) noexcept {
  snapshot::Apart apart;
  return real::setns()(fd, nstype);
}
