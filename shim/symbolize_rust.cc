// symbolize_rust: see symbolize_rust.h.
#include "symbolize_rust.h"

#include <string>

// Last: libiberty.h, which demangle.h includes, defines basename away.
#include <libiberty/demangle.h>

namespace symbolize {
namespace internal {

namespace {

// libiberty bounds how deep a v0 name recurses, not how much it prints:
// back-references let each level repeat the last twice, and a 259-byte
// symbol prints 16 GB. Past this many bytes the name is left as it is, and
// the demangler is left at once (it holds nothing of ours but the string,
// and no lock).
constexpr size_t kMaxName = 64 << 10;

struct Out {
  std::string name;
  void* escape[5];
};

void append(const char* text, size_t n, void* p) {
  auto* out = static_cast<Out*>(p);
  if (out->name.size() + n > kMaxName) __builtin_longjmp(out->escape, 1);
  out->name.append(text, n);
}

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
  // LLVM's suffixes (".llvm.1075...", ".cold") are not the name's; the
  // libiberty of binutils 2.35 (Debian 11) rejects a name that has one, a
  // newer one leaves it out: cut here, so both read it alike. A v0 name
  // has no '.' of its own; a legacy one may (".." in a path inside <>),
  // but never after its closing "17h<16 hex digits>E".
  std::string whole(sym);
  size_t cut = std::string::npos;
  if (sym[1] == 'R') {
    cut = whole.find('.');
  } else {
    for (size_t e = whole.find("E."); e != std::string::npos; e = whole.find("E.", e + 1))
      if (e >= 19 && whole.compare(e - 19, 3, "17h") == 0 &&
          whole.find_first_not_of("0123456789abcdef", e - 16) == e)
        cut = e + 1;
  }
  if (cut != std::string::npos) whole.resize(cut);
  Out o;
  if (__builtin_setjmp(o.escape) != 0) return false;  // too long: the raw symbol stays
  if (!rust_demangle_callback(whole.c_str(), 0, append, &o) || o.name.empty()) return false;
  *out = std::move(o.name);
  return true;
}

}  // namespace internal
}  // namespace symbolize
