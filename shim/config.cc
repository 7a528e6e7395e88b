// config: parses PROFILE_* strictly; see config.h.
#include "config.h"

#include <cstring>

namespace config {
namespace {

const Var kVars[] = {
    {"PROFILE_DIR", "(unset: inert)", "directory for the profiles, created like mkdir -p"},
    {"PROFILE_NAME", "run", "base name of the files, slugged to [A-Za-z0-9._-]"},
    {"PROFILE_CPU_HZ", "100", "CPU samples per second of CPU time per thread, 0..10000; 0 = no CPU profile"},
    {"PROFILE_HEAP_SAMPLE", "524288",
     "mean bytes between heap samples, 0..2^40, rounded to a power of two; 0 = no heap profile"},
    {"PROFILE_WAIT_SAMPLE", "100000000",
     "nanoseconds of waiting per wait-profile sample, 0..60000000000; 0 = no wait profile"},
    {"PROFILE_STOP_TIMEOUT", "10", "seconds a stop may spend writing before it gives up, 0.1..3600"},
};

// Whole-string decimal; rejects signs, spaces, empty and overflow.
bool parse_u64(const char* s, uint64_t max, uint64_t* out) {
  if (!s || !*s) return false;
  uint64_t v = 0;
  for (const char* p = s; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    uint64_t d = uint64_t(*p - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// Seconds as "N" or "N.F" (at most 3 decimals), returned in milliseconds.
bool parse_seconds_ms(const char* s, uint64_t* ms) {
  if (!s || !*s) return false;
  const char* dot = std::strchr(s, '.');
  std::string whole(s, dot ? size_t(dot - s) : std::strlen(s));
  uint64_t w = 0, frac = 0;
  if (!parse_u64(whole.c_str(), 3600, &w)) return false;
  if (dot) {
    std::string f(dot + 1);
    if (f.empty() || f.size() > 3) return false;
    while (f.size() < 3) f += '0';
    if (!parse_u64(f.c_str(), 999, &frac)) return false;
  }
  *ms = w * 1000 + frac;
  return true;
}

std::string bad(const char* var, const char* val, const char* want) {
  return std::string(var) + "='" + val + "' is malformed: expected " + want;
}

}  // namespace

std::string unknown_vars(const char* const* envp) {
  std::string out;
  for (const char* const* e = envp; e && *e; ++e) {
    if (std::strncmp(*e, "PROFILE_", 8) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    std::string name(*e, eq ? size_t(eq - *e) : std::strlen(*e));
    bool known = false;
    for (const Var& v : kVars) known = known || name == v.name;
    if (!known) out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

const Var* vars(int* n) {
  *n = int(sizeof kVars / sizeof kVars[0]);
  return kVars;
}

std::string slug(const std::string& in) {
  std::string out;
  bool in_run = false;
  for (unsigned char c : in) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-';
    if (keep) {
      out += char(c);
      in_run = false;
    } else if (!in_run) {
      out += '-';
      in_run = true;
    }
  }
  size_t skip = out.find_first_not_of(".-_");
  out = skip == std::string::npos ? std::string() : out.substr(skip);
  if (out.size() > 128) out.resize(128);
  return out.empty() ? "run" : out;
}

// In integers: libm's log2 would make the shim need libm (docs/DESIGN.md).
// 2^k <= bytes < 2^(k+1) rounds up when bytes >= 2^(k+1/2), that is when
// bytes^2 >= 2^(2k+1).
unsigned lg_for_sample(uint64_t bytes) {
  if (bytes <= 1) return 0;
  unsigned k = 63 - unsigned(__builtin_clzll(bytes));
  unsigned __int128 sq = (unsigned __int128)bytes * bytes;
  if (sq >= (unsigned __int128)1 << (2 * k + 1)) ++k;
  return k > 62 ? 62 : k;
}

std::string parse(Getenv get, Config* out) {
  Config c;
  const char* dir = get("PROFILE_DIR");
  c.active = dir && *dir;
  if (!c.active) {
    *out = c;
    return "";
  }
  c.dir = dir;
  if (const char* n = get("PROFILE_NAME")) c.name = slug(n);
  uint64_t v = 0;
  if (const char* s = get("PROFILE_CPU_HZ")) {
    if (!parse_u64(s, 10000, &v)) return bad("PROFILE_CPU_HZ", s, "an integer from 0 to 10000");
    c.cpu_hz = uint32_t(v);
  }
  if (const char* s = get("PROFILE_HEAP_SAMPLE")) {
    if (!parse_u64(s, uint64_t(1) << 40, &v))
      return bad("PROFILE_HEAP_SAMPLE", s, "an integer number of bytes from 0 to 1099511627776");
    c.heap_sample = v;
  }
  c.heap_lg_sample = lg_for_sample(c.heap_sample);
  if (const char* s = get("PROFILE_WAIT_SAMPLE")) {
    if (!parse_u64(s, 60000000000ull, &v))
      return bad("PROFILE_WAIT_SAMPLE", s, "an integer number of nanoseconds from 0 to 60000000000");
    c.wait_sample_ns = v;
  }
  if (const char* s = get("PROFILE_STOP_TIMEOUT")) {
    if (!parse_seconds_ms(s, &v) || v < 100)
      return bad("PROFILE_STOP_TIMEOUT", s, "seconds from 0.1 to 3600 (e.g. 10 or 2.5)");
    c.stop_timeout_ms = v;
  }
  *out = c;
  return "";
}

}  // namespace config
