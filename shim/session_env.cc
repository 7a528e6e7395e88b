// session_env: absolute paths for the children; see session_env.h.
#include "session_env.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

namespace session_env {
namespace {

// This shim's own file, absolute (dladdr gives the name as LD_PRELOAD had it).
std::string own_path() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&pass_on_absolute), &info) || !info.dli_fname) return "";
  char buf[PATH_MAX];
  return realpath(info.dli_fname, buf) ? std::string(buf) : std::string();
}

}  // namespace

void pass_on_absolute(const std::string& abs_dir) {
  const char* dir = getenv("PROFILE_DIR");
  if (dir && *dir && *dir != '/') setenv("PROFILE_DIR", abs_dir.c_str(), 1);
  const char* pre = getenv("LD_PRELOAD");
  if (!pre || !*pre) return;
  std::string self = own_path(), out;
  bool changed = false;
  // ld.so splits LD_PRELOAD at spaces and colons; the separators are kept.
  for (const char* p = pre; *p;) {
    size_t n = strcspn(p, " :");
    std::string entry(p, n);
    if (!entry.empty() && entry[0] != '/' && !self.empty()) {
      char buf[PATH_MAX];
      if (realpath(entry.c_str(), buf) && self == buf) {
        entry = self;
        changed = true;
      }
    }
    out += entry;
    p += n;
    if (*p) out += *p++;
  }
  if (changed) setenv("LD_PRELOAD", out.c_str(), 1);
}

}  // namespace session_env
