// symbolize_rust: see symbolize_rust.h.
#include "symbolize_rust.h"

// Last: libiberty.h, which demangle.h includes, defines basename away.
#include <libiberty/demangle.h>

namespace symbolize {
namespace internal {

namespace {

void append(const char* text, size_t n, void* out) { static_cast<std::string*>(out)->append(text, n); }

}  // namespace

bool rust_name(const char* sym, std::string* out) {
  // No Rust symbol starts otherwise. A C++ _ZN name goes on to libiberty,
  // which turns it down: it lacks the hash segment, or has parameters.
  if (sym[0] != '_' || (sym[1] != 'R' && (sym[1] != 'Z' || sym[2] != 'N'))) return false;
  // rust-demangle.o alone, not cplus_demangle(DMGL_RUST): that one links
  // in libiberty's xmalloc, which exits the process when memory runs out.
  // The callback form writes straight into the name; a name that fails
  // half-way has already passed its first part on, and is not used.
  // Without DMGL_VERBOSE: no hashes, no disambiguators.
  std::string name;
  if (!rust_demangle_callback(sym, 0, append, &name) || name.empty()) return false;
  *out = std::move(name);
  return true;
}

}  // namespace internal
}  // namespace symbolize
