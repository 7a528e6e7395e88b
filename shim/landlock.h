// landlock: what a Landlock sandbox the program puts itself in leaves of
// the shim's stop.
//
// landlock_restrict_self takes away, from the calling thread and what it
// starts or execs from then on, the file access its ruleset names and no
// rule grants back. Unlike a seccomp filter, a call it denies fails
// (EACCES) rather than kills: the program is safe whatever the shim does,
// but the stop can no longer make its files (xz 5.8 restricts itself to the
// files it has open: no new file anywhere, no read of /proc). The shim does
// not widen the program's sandbox for itself (a rule of its own for
// PROFILE_DIR would be a hole in it), and a ruleset cannot be read back: it
// sees the restriction go in through syscall() (hooks_sandbox.cc), and,
// once it is in force, tries what the stop will need on that thread. If the
// sandbox denies it, the stop is given up there with one line that says so,
// as for a seccomp filter (sandbox.h), and the images it execs stay inert.
#pragma once

namespace landlock {

// After the program's landlock_restrict_self succeeded on this thread.
// Keeps errno.
void after_restrict_self();

}  // namespace landlock
