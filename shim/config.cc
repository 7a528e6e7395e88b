// config: parses PROFILE_* strictly; see config.h.
#include "config.h"

#include <signal.h>

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
    {"PROFILE_PEAK_FLOOR", "64M",
     "heap in use below which no NAME.heap-peak.pprof is written, bytes (suffix K, M or G); 0 = none"},
    {"PROFILE_PEAK_AFTER", "10", "seconds an image runs before its first heap-peak file, 0..86400"},
    {"PROFILE_INTERVAL", "0", "a snapshot every such duration while running: 1s..30d, as 30s, 5m, 1h; 0 = none"},
    {"PROFILE_SNAPSHOT_SIGNAL", "0", "a signal that asks for a snapshot, as USR2 or RTMIN+3; 0 = none"},
    {"PROFILE_SNAPSHOT_TRIGGER", "0", "1: touching DIR/NAME.snapshot asks for a snapshot (polled each second)"},
    {"PROFILE_SNAPSHOT_KEEP", "10", "numbered snapshot sets left on disk, oldest removed first, 1..100000"},
    {"PROFILE_MEM_HZ", "0", "rows of NAME.mem.tsv per second besides one per snapshot and peak, 0..100"},
    {"PROFILE_LOG", "(unset: stderr)",
     "a file every image's summary line is appended to (relative: in DIR); stderr keeps only NAME's"},
    {"PROFILE_ONLY", "(unset: every image)",
     "program names, comma-separated: only images of these programs are profiled, the others stay inert"},
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

// "N" or "N.F" (at most 3 decimals, N at most max_whole), in thousandths.
bool parse_milli(const char* s, uint64_t max_whole, uint64_t* ms) {
  if (!s || !*s) return false;
  const char* dot = std::strchr(s, '.');
  std::string whole(s, dot ? size_t(dot - s) : std::strlen(s));
  uint64_t w = 0, frac = 0;
  if (!parse_u64(whole.c_str(), max_whole, &w)) return false;
  if (dot) {
    std::string f(dot + 1);
    if (f.empty() || f.size() > 3) return false;
    while (f.size() < 3) f += '0';
    if (!parse_u64(f.c_str(), 999, &frac)) return false;
  }
  *ms = w * 1000 + frac;
  return true;
}

// Seconds as "N" or "N.F", up to an hour, in milliseconds.
bool parse_seconds_ms(const char* s, uint64_t* ms) { return parse_milli(s, 3600, ms); }

// Bytes, with an optional binary suffix K, M or G.
bool parse_bytes(const char* s, uint64_t max, uint64_t* out) {
  if (!s || !*s) return false;
  std::string digits(s);
  unsigned shift = 0;
  switch (digits.back()) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    default: break;
  }
  if (shift) digits.pop_back();
  uint64_t v = 0;
  if (!parse_u64(digits.c_str(), max >> shift, &v)) return false;
  *out = v << shift;
  return true;
}

// A duration with its unit: "500ms", "30s", "1.5m", "5m", "1h", "2d".
bool parse_duration_ms(const char* s, uint64_t* ms) {
  static const struct { const char* unit; uint64_t ms; } kUnits[] = {
      {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
  if (!s || !*s) return false;
  size_t n = std::strlen(s), digits = n;
  while (digits > 0 && !(s[digits - 1] >= '0' && s[digits - 1] <= '9')) --digits;
  std::string number(s, digits), unit(s + digits);
  for (const auto& u : kUnits) {
    if (unit != u.unit) continue;
    uint64_t thousandths = 0;  // of the unit
    if (!parse_milli(number.c_str(), 100000000, &thousandths)) return false;
    *ms = thousandths * u.ms / 1000;
    return true;
  }
  return false;
}

std::string bad(const char* var, const char* val, const char* want) {
  return std::string(var) + "='" + val + "' is malformed: expected " + want;
}

// Names as a file has them: no '/', no space or control character, no
// empty one (",," or a trailing comma is a typo, not "any program").
bool valid_only(const char* s) {
  if (!*s) return false;
  bool empty = true;
  for (const char* p = s;; ++p) {
    if (*p == ',' || !*p) {
      if (empty) return false;
      if (!*p) return true;
      empty = true;
    } else if (*p == '/' || (unsigned char)*p <= ' ' || *p == 0x7f) {
      return false;
    } else {
      empty = false;
    }
  }
}

}  // namespace

int snapshot_signal_number(const char* name) {
  // Ending the process by default, and not a fault: a snapshot in place of
  // the death nobody asked for when the operator sends it.
  static const struct { const char* name; int sig; } kNames[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},     {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
      {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},   {"TERM", SIGTERM}, {"VTALRM", SIGVTALRM},
      {"PROF", SIGPROF}, {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ}, {"PWR", SIGPWR}};
  if (!name) return 0;
  if (std::strncmp(name, "SIG", 3) == 0) name += 3;
  for (const auto& k : kNames)
    if (std::strcmp(name, k.name) == 0) return k.sig;
  int base = 0, sign = 0;
  if (std::strncmp(name, "RTMIN", 5) == 0) base = SIGRTMIN, sign = 1;
  if (std::strncmp(name, "RTMAX", 5) == 0) base = SIGRTMAX, sign = -1;
  if (!sign) return 0;
  uint64_t off = 0;
  if (name[5] != 0 && !((name[5] == '+' && sign > 0) || (name[5] == '-' && sign < 0))) return 0;
  if (name[5] != 0 && !parse_u64(name + 6, 64, &off)) return 0;
  int sig = base + sign * int(off);
  // SIGRTMAX-4 is the shim's own signal (own_signal.h).
  if (sig < SIGRTMIN || sig > SIGRTMAX || sig == SIGRTMAX - 4) return 0;
  return sig;
}

bool only_lists(const std::string& only, const char* name) {
  size_t len = std::strlen(name), at = 0;
  if (!len) return false;
  while (at <= only.size()) {
    size_t end = only.find(',', at);
    if (end == std::string::npos) end = only.size();
    if (end - at == len && only.compare(at, len, name) == 0) return true;
    at = end + 1;
  }
  return false;
}

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
  if (const char* s = get("PROFILE_PEAK_FLOOR")) {
    if (!parse_bytes(s, uint64_t(1) << 50, &v))
      return bad("PROFILE_PEAK_FLOOR", s, "bytes from 0 to 2^50, with an optional suffix K, M or G (e.g. 64M)");
    c.peak_floor = v;
  }
  if (const char* s = get("PROFILE_PEAK_AFTER")) {
    if (!parse_milli(s, 86400, &v) || v > 86400000)
      return bad("PROFILE_PEAK_AFTER", s, "seconds from 0 to 86400 (e.g. 10 or 2.5)");
    c.peak_after_ms = v;
  }
  if (const char* s = get("PROFILE_INTERVAL")) {
    if (std::strcmp(s, "0") != 0 && (!parse_duration_ms(s, &v) || v < 1000 || v > 30 * 86400000ull))
      return bad("PROFILE_INTERVAL", s, "a duration from 1s to 30d with its unit (e.g. 30s, 5m, 1h), or 0");
    c.interval_ms = std::strcmp(s, "0") == 0 ? 0 : v;
  }
  if (const char* s = get("PROFILE_SNAPSHOT_SIGNAL")) {
    if (std::strcmp(s, "0") != 0 && !(c.snapshot_signal = snapshot_signal_number(s)))
      return bad("PROFILE_SNAPSHOT_SIGNAL", s,
                 "a signal name such as USR2, HUP or RTMIN+3 (one that ends a process by default, "
                 "not a fault, not the shim's own SIGRTMAX-4)");
  }
  if (const char* s = get("PROFILE_SNAPSHOT_TRIGGER")) {
    if (std::strcmp(s, "0") != 0 && std::strcmp(s, "1") != 0) return bad("PROFILE_SNAPSHOT_TRIGGER", s, "0 or 1");
    c.snapshot_trigger = s[0] == '1';
  }
  if (const char* s = get("PROFILE_SNAPSHOT_KEEP")) {
    if (!parse_u64(s, 100000, &v) || v < 1) return bad("PROFILE_SNAPSHOT_KEEP", s, "an integer from 1 to 100000");
    c.snapshot_keep = uint32_t(v);
  }
  if (const char* s = get("PROFILE_MEM_HZ")) {
    if (!parse_milli(s, 100, &v) || v > 100000)
      return bad("PROFILE_MEM_HZ", s, "rows per second from 0 to 100, at most 3 decimals (e.g. 1 or 0.1)");
    c.mem_millihz = v;
  }
  if (const char* s = get("PROFILE_LOG")) {
    size_t n = std::strlen(s);
    if (n && (s[n - 1] == '/' || std::strcmp(s, ".") == 0 || std::strcmp(s, "..") == 0))
      return bad("PROFILE_LOG", s, "a file's path, absolute or relative to PROFILE_DIR (e.g. profshim.log)");
    c.log = s;
  }
  if (const char* s = get("PROFILE_ONLY")) {
    if (*s && !valid_only(s))
      return bad("PROFILE_ONLY", s,
                 "program names separated by commas, as python3,cc1plus: no empty name, no '/', no space");
    c.only = s;
  }
  *out = c;
  return "";
}

}  // namespace config
