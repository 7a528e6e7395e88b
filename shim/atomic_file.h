// atomic_file: the only code that creates directories and files for the
// profiles, never group- or world-writable whatever the umask. A profile is written to a hidden temporary beside its target
// (O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC), then renamed over the target, so a
// reader never sees a partial file and a symlink planted at the final name
// is replaced, never followed. Not fsync()ed: docs/DESIGN.md, "Writing". The I/O calls go through mutable
// pointers so unit tests can fail the Nth write.
#pragma once
#include <stddef.h>
#include <sys/types.h>
#include <string>

namespace atomic_file {

// mkdir -p, then proves the directory writable by creating and removing a
// probe file. "" on success, else why not.
std::string ensure_dir(const std::string& dir);

// "(running as user NAME, uid N)" for the effective uid, the one a
// directory's permissions are checked against: a directory's error names
// who was refused. The name comes from /etc/passwd read as a file, never
// through NSS (whose modules would load into the program, and may ask the
// network, before main); "(running as uid N)" when it is not there.
std::string running_as();
// The user name of uid in text in /etc/passwd's format, "" if none.
std::string passwd_name(const std::string& text, uid_t uid);

// Writes data to dir/name atomically. "" on success, else why not; on
// failure the target is untouched and no temporary is left behind.
std::string write(const std::string& dir, const std::string& name, const std::string& data);

// A stop that gave up waiting for the writer: no rename happens after this,
// and the temporary being written, if any, is removed. Signal-safe.
void abandon();
// A new stop of the same process (after a failed exec, in a fork child).
void reset();

// The stop's own writes begin (the snapshot worker has let go): the files
// renamed before it, snapshots', are not the stop's.
void stop_writes();
// The files renamed into place since reset() or stop_writes(), in order
// (the first four):
// recorded before the writer lets go of the rename, so the list is complete
// once abandon() has returned -- a line printed by a waiter that gave up
// names every file that exists. Signal-safe.
int renamed_count();
const char* renamed_path(int i);

extern ssize_t (*write_fn)(int fd, const void* buf, size_t n);
extern int (*open_fn)(const char* path, int flags, mode_t mode);

}  // namespace atomic_file
