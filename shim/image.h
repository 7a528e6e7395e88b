// image: which process image this is, and so what its files are called.
// The root process's final image writes NAME.*; every other image (a forked
// child, a descendant however started, an image that exec'd into another
// profiled one) writes NAME.PROG.PID[.GEN].*. Identity travels in the
// environment as PROFSHIM_IMAGE=ROOTPID:PID:GEN:SESSION:START:ROOTSID (docs/DESIGN.md,
// "Fork and exec"). Not signal-safe; called at setup, fork, exec and the stop.
#pragma once
#include <stdint.h>
#include <sys/types.h>

#include <string>

#include "config.h"

namespace image {

// At setup: reads PROFSHIM_IMAGE (one of this session's, or not) and sets
// this image's, for the program's children to inherit.
void setup(const config::Config* cfg, pid_t pid);
// In a fork child: a new image, not the root.
void after_fork(pid_t pid);

pid_t pid();
bool root();
// "<name>" for the root's final image, "<name>.<prog>.<pid>[.<gen>]" else.
std::string stem(bool as_root);
// The stem this image writes as now.
std::string stem();

// At the stop, the stem to write under (docs/DESIGN.md, "Fork and exec");
// cpu_ns the image's CPU to the stop, recorded in its files' marker:
//  - NAME for the root's final image, and for an orphaned image detached
//    from the root's session (setsid, daemon) that stops after the root has
//    gone (a daemon), unless the NAME.* this session's root (or an earlier
//    such image) wrote records at least cpu_ns: a helper left behind keeps
//    its own stem. An image that takes NAME first renames the NAME.* another
//    image of this session wrote to that image's own stem. If NAME.* is
//    another session's and was written by another program, it stays: this
//    image writes under its own stem instead.
//  - any other stem as it is, unless a file of that name was written
//    during this session (by an earlier image with the same pid: pids are
//    reused), else the first of stem-2, stem-3, ... that was not. An image
//    keeps the stem it chose for a later stop of its own (after a failed
//    exec). A file from an earlier session is replaced.
std::string final_stem(const std::string& dir, const std::string& stem, uint64_t cpu_ns);
// While running (snapshots, heap peaks, mem.tsv): NAME for the root; any
// other stem made unique within the session as final_stem does, and kept.
std::string unique_stem(const std::string& dir, const std::string& stem);
// Whether path was modified during this session (an earlier image's file,
// or this one's), not left by an earlier run.
bool written_this_session(const std::string& path);
// What each file's gzip header records of the image that wrote it, for
// final_stem to read: session, pid, own stem, CPU to its stop, executable.
std::string marker();

// A seccomp filter forbids the shim some of its calls (sandbox.h): the
// images this one execs carry it in their marker and stay inert, since the
// filter is theirs too and the shim there cannot see it.
void mark_sandboxed();
// Whether a marker value (PROFSHIM_IMAGE's) says so; before setup.
bool marker_sandboxed(const char* value);

// Whether an exec with this environment starts a profiled image: the shim
// preloaded, PROFILE_DIR set, and PROFILE_ONLY (if set) naming the program
// at path (may be "": an exec of a descriptor) or argv0 (may be null).
bool env_profiles(char* const envp[], const char* path, const char* argv0);
// The environment for an exec: a copy of envp (one malloc'd block, freed
// with free()) whose PROFSHIM_IMAGE names the next generation of this pid,
// or null if it could not be made. !may_be_root: the new image is not the
// root even if this one is (the root's NAME.* is already written).
char** exec_env(char* const envp[], bool may_be_root = true);

// For a program whose children do not inherit its environment from libc's
// environ (Go: image_publish.cc): its marker, as its children would see it,
// in PROFILE_DIR (dir) for as long as it runs; unpublish() at its stop.
void publish_for_children(const std::string& dir, const char* marker);
void unpublish();
// The marker the parent published for its children, if it is still that
// process; "" if none.
std::string parents_marker(const std::string& dir, pid_t parent);

}  // namespace image
