// symbolize_ghc: see symbolize_ghc.h. GHC writes an external name's label
// as unit_Module_name_kind, each of the first three Z-encoded on its own
// (GHC.Utils.Encoding), so the underscores between them are the only
// literal ones; the main unit's code has no unit part. The kind (_info,
// _entry, _slow...) is dropped: an info table, its entry code and its slow
// entry are the one Haskell function, which GHC's own profiler names once.
// A unit's id is shown up to its version ("pkg-0.1-inplace", a cabal
// store's "text-2.0.2-<hash>": "pkg-0.1", "text-2.0.2"): the rest tells
// builds apart, and one process never holds two builds of one version.
#include "symbolize_ghc.h"

#include <cstdint>
#include <cstring>

namespace symbolize {
namespace ghc {

namespace {

bool digit(char c) { return c >= '0' && c <= '9'; }
bool upper(char c) { return c >= 'A' && c <= 'Z'; }
bool lower(char c) { return c >= 'a' && c <= 'z'; }
bool alnum(char c) { return digit(c) || upper(c) || lower(c); }

int hex_value(char c) {
  if (digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool append_utf8(uint32_t cp, std::string* out) {
  if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | cp >> 6);
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | cp >> 12);
    *out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | cp >> 18);
    *out += static_cast<char>(0x80 | (cp >> 12 & 0x3f));
    *out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return true;
}

// What follows 'Z' (upper) or 'z' (lower) in GHC's table.
char unescape(char esc, char c) {
  static const char kUpper[][2] = {{'L', '('}, {'R', ')'}, {'M', '['}, {'N', ']'}, {'C', ':'}, {'Z', 'Z'}};
  static const char kLower[][2] = {{'z', 'z'}, {'a', '&'}, {'b', '|'}, {'c', '^'}, {'d', '$'},
                                   {'e', '='}, {'g', '>'}, {'h', '#'}, {'i', '.'}, {'l', '<'},
                                   {'m', '-'}, {'n', '!'}, {'p', '+'}, {'q', '\''}, {'r', '\\'},
                                   {'s', '/'}, {'t', '*'}, {'u', '_'}, {'v', '%'}};
  if (esc == 'Z') {
    for (const auto& e : kUpper)
      if (e[0] == c) return e[1];
  } else {
    for (const auto& e : kLower)
      if (e[0] == c) return e[1];
  }
  return 0;
}

// "Z3T" is "(,,)", "Z2H" "(#,#)"; the arity is decimal. GHC spells the
// unboxed unit "(# #)" (Z1H) and the unit "()" (Z0T).
bool tuple(const std::string& z, size_t* i, std::string* out) {
  unsigned n = 0;
  while (*i < z.size() && digit(z[*i]) && n < 10000) n = n * 10 + (z[(*i)++] - '0');
  if (*i >= z.size() || (z[*i] != 'T' && z[*i] != 'H') || n > 1000) return false;
  const bool unboxed = z[(*i)++] == 'H';
  const std::string commas(n > 1 ? n - 1 : 0, ',');
  *out += unboxed ? (n <= 1 ? "(# #)" : "(#" + commas + "#)") : "(" + commas + ")";
  return true;
}

// "z3bbU" is U+3BB; GHC puts a 0 before a code point whose hex starts with
// a letter, so the escape is never read as one of the table's.
bool code_point(const std::string& z, size_t* i, std::string* out) {
  uint32_t cp = 0;
  int digits = 0;
  for (; *i < z.size() && hex_value(z[*i]) >= 0; ++*i)
    if (++digits > 8 || (cp = cp << 4 | hex_value(z[*i])) > 0x10ffff) return false;
  if (*i >= z.size() || z[(*i)++] != 'U') return false;
  return append_utf8(cp, out);
}

// A package's name and version as "name-1.2.3", without what a build tool
// adds after the version.
bool unit_name(const std::string& z, std::string* out) {
  if (!z_decode(z, out) || out->empty() || !(lower(out->front()) || upper(out->front()))) return false;
  for (char c : *out)
    if (!alnum(c) && c != '-' && c != '.') return false;
  size_t keep = std::string::npos;  // the end of the last version component
  for (size_t start = 0; start < out->size();) {
    size_t end = out->find('-', start);
    if (end == std::string::npos) end = out->size();
    bool version = end > start && digit((*out)[start]);
    for (size_t k = start; version && k < end; ++k) version = digit((*out)[k]) || (*out)[k] == '.';
    if (version) keep = end;
    start = end + 1;
  }
  if (keep != std::string::npos) out->resize(keep);
  return true;
}

// "GHC.Base", "Data.Text.Internal", ":Main" (the module of GHC's wrapper
// around main): components that begin upper case (or with a character
// beyond ASCII), of letters, digits, ' and _.
bool module_name(const std::string& z, std::string* out) {
  if (!z_decode(z, out) || out->empty()) return false;
  size_t k = (*out)[0] == ':' ? 1 : 0;
  for (bool start = true; k < out->size(); ++k) {
    const unsigned char c = (*out)[k];
    if (start && !upper(c) && c < 0x80) return false;
    if (!start && c == '.') {
      start = true;
      continue;
    }
    if (!alnum(c) && c != '_' && c != '\'' && c < 0x80) return false;
    start = false;
  }
  return (*out)[out->size() - 1] != '.' && (out->size() > 1 || (*out)[0] != ':');
}

// The kinds of label whose name is a function's (or a constructor's, a
// closure's): the longest first, so "Main_Foo_con_info" is Main.Foo.
const char* const kKinds[] = {"con_info", "con_entry", "static_info", "static_entry", "info",
                              "entry",    "slow",      "fast",        "closure",      "bytes", "srt"};

bool parse(const std::vector<std::string>& parts, std::string* out) {
  std::string unit, mod, name;
  const size_t n = parts.size();
  if (n == 3 && !unit_name(parts[0], &unit)) return false;
  if (!module_name(parts[n - 2], &mod) || !z_decode(parts[n - 1], &name) || name.empty()) return false;
  *out = (unit.empty() ? "" : unit + ":") + mod + "." + name;
  return true;
}

}  // namespace

bool z_decode(const std::string& z, std::string* out) {
  out->clear();
  for (size_t i = 0; i < z.size();) {
    const char c = z[i++];
    if (c != 'z' && c != 'Z') {
      if (!alnum(c)) return false;
      *out += c;
      continue;
    }
    if (i >= z.size()) return false;
    if (digit(z[i])) {
      if (!(c == 'Z' ? tuple(z, &i, out) : code_point(z, &i, out))) return false;
      continue;
    }
    const char d = unescape(c, z[i++]);
    if (!d) return false;
    *out += d;
  }
  return true;
}

bool function_name(const char* sym, std::string* out) {
  if (std::strncmp(sym, "stg_", 4) == 0) return false;  // the RTS's: "stg_IND_STATIC_info" is no module's
  std::vector<std::string> parts;
  for (const char* p = sym;; ++p) {
    const char* e = std::strchr(p, '_');
    parts.emplace_back(p, e ? size_t(e - p) : std::strlen(p));
    if (parts.back().empty() || parts.size() > 6) return false;
    if (!e) break;
    p = e;
  }
  for (const char* kind : kKinds) {
    const size_t words = std::strchr(kind, '_') ? 2 : 1;
    if (parts.size() < words + 2 || parts.size() > words + 3) continue;
    std::string tail = parts[parts.size() - words];
    if (words == 2) tail += "_" + parts.back();
    if (tail != kind) continue;
    std::vector<std::string> head(parts.begin(), parts.end() - words);
    if (parse(head, out)) return true;
  }
  return false;
}

namespace {

bool starts_hs_library(const std::string& name) { return name.compare(0, 5, "libHS") == 0; }

}  // namespace

bool compiled_by_ghc(const internal::ModInfo& mi, const internal::Dynamic* dyn) {
  const size_t slash = mi.path.rfind('/');
  if (starts_hs_library(slash == std::string::npos ? mi.path : mi.path.substr(slash + 1))) return true;
  if (dyn) {
    if (starts_hs_library(dyn->soname)) return true;
    for (const std::string& lib : dyn->needed)
      if (starts_hs_library(lib)) return true;
  }
  // Every start of the RTS (hs_main, hs_init, hs_init_with_rtsopts) calls
  // it, and a static link keeps only what is called.
  for (const internal::FuncSym& s : mi.syms)
    if (s.name[0] == 'h' && std::strcmp(s.name, "hs_init_ghc") == 0) return true;
  return false;
}

// Decided at the first of mi's frames to be named: a module no sample
// lands in is never read for it, and each is read once.
void name_frames(const internal::ModInfo& mi, const std::vector<procmaps::Line>& lines,
                 const procmaps::Line* head, signed char* made, std::vector<pprof::Frame>* frames) {
  if (frames->empty()) return;
  if (*made < 0) {
    internal::Dynamic dyn;
    const bool has_dyn = head && !mi.vdso && internal::dynamic_from_memory(lines, *head, &dyn);
    *made = compiled_by_ghc(mi, has_dyn ? &dyn : nullptr);
  }
  std::string name;
  for (pprof::Frame& f : *frames)
    if (*made && function_name(f.system_name.c_str(), &name)) f.name = name;
}

}  // namespace ghc
}  // namespace symbolize
