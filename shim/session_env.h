// session_env: what the shim passes on to the images the program starts.
// A relative PROFILE_DIR, or a relative LD_PRELOAD naming the shim, means
// something else to a child that changes directory first (pyenv's python3 is
// a bash script that cd's; `sh -c 'cd sub && prog'`): the files would land
// in sub/rel/, or the child would not load the shim at all. The shim made
// the directory absolute for itself at setup; it passes that on, and its own
// path likewise. The program sees these two values changed (documented in
// docs/CONFIG.md). Not signal-safe; setup only.
#pragma once
#include <string>

namespace session_env {

// PROFILE_DIR=abs_dir in the environment if it was relative; a relative
// LD_PRELOAD entry that is this shim made absolute.
void pass_on_absolute(const std::string& abs_dir);

}  // namespace session_env
