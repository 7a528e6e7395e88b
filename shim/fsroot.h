// fsroot: the filesystem root the shim resolves its own paths against.
//
// A program that chroot()s (a daemon sandboxing itself) would otherwise
// take the shim's paths with it: PROFILE_DIR, /proc's maps and the images
// read for symbols all resolve inside the new root, where they are not. So
// the chroot wrapper calls before_chroot() first, which opens the root the
// program had (`/`, O_PATH, close-on-exec) and keeps it at the top of the
// descriptor limit, as errline keeps stderr's duplicate; later chroots keep
// that first one. From then on an absolute path of the shim's resolves from
// that descriptor (openat(root, path + 1)); before it, and for a relative
// path, the calls are the plain ones. A program that never chroots holds
// no descriptor of ours.
//
// Every call here is a raw system call: safe in a signal handler and at a
// fatal stop. They return as the system calls do (-1 and errno).
//
// What is left as it was: an absolute symlink met on the way resolves in
// the program's root, as the kernel resolves it; a root changed behind the
// wrapper (a raw system call, pivot_root, a mount namespace) is not seen.
#pragma once
#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>

namespace fsroot {

// From the chroot wrapper of an image that profiles, before the call.
void before_chroot();
// From the descriptor wrappers: fds [lo, hi] are about to be closed or
// replaced. The program's own loop over every descriptor closes ours; the
// shim forgets it (its paths then resolve in the program's root).
void before_close(unsigned lo, unsigned hi);

int open(const char* path, int flags, mode_t mode = 0);
int stat(const char* path, struct stat* st);
int lstat(const char* path, struct stat* st);
// As access(2): the real ids.
int access(const char* path, int mode);
int mkdir(const char* path, mode_t mode);
int unlink(const char* path);
int rmdir(const char* path);
int rename(const char* from, const char* to);
ssize_t readlink(const char* path, char* buf, size_t size);
// Not signal-safe (fdopendir allocates).
DIR* opendir(const char* path);

}  // namespace fsroot
