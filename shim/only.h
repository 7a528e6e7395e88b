// only: whether PROFILE_ONLY lets this image be profiled. An image is one
// of the listed programs if either of its names is listed: its executable's
// file name (/proc/self/exe: python3.11) or the name it was started by
// (argv[0]'s last component: python3). Not the kernel's comm: for a script
// that is the script's name, and pyenv's python3 is a bash script called
// python3 (so is every shim of that kind): comm would pick the wrapper the
// operator wanted to skip. A script is its interpreter's image.
// Decided once per image, at its first malloc (the allocator's choice,
// alloc_choice.h) or at setup, whichever comes first, so the two agree: the
// names are read with raw system calls into static memory, before libc may
// have set itself up. A fork child keeps its parent's answer; an exec'd
// image decides anew.
#pragma once
#include "config.h"

namespace only {

// True if PROFILE_ONLY is unset or lists one of this image's names.
bool selected(const config::Config& cfg);

// Whether the image an exec starts will be selected by the PROFILE_ONLY it
// is given (only: its value, null if unset), judged from the path it execs
// (and that path's target, for a link), and its argv[0].
bool selects_exec(const char* only, const char* path, const char* argv0);

}  // namespace only
