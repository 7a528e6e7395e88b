// config: parses PROFILE_* strictly; see config.h.
#include "config.h"

#include <signal.h>

#include <cstring>

namespace config {
namespace {

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

// Into a field narrower than the parse.
bool parse_u32(const char* s, uint64_t lo, uint64_t hi, uint32_t* out) {
  uint64_t v = 0;
  if (!parse_u64(s, hi, &v) || v < lo) return false;
  *out = uint32_t(v);
  return true;
}

// One row per variable: its name, its default (written as a value of the
// variable, and parsed like one: the Config has no other default), what it
// does, what it accepts (the words of --help and of the error), and its
// strict parser into the Config. A default in parentheses describes the
// absence of a value and is not parsed. Nothing else in the shim or its
// tools spells a default or a range (docs/CONFIG.md is held to this table).
using C = Config;
const Var kVars[] = {
    {"PROFILE_DIR", "(unset: inert)", "directory for the profiles, created like mkdir -p", "a path",
     [](const char* s, C* c) { return c->active = *s != 0, c->dir = s, true; }},
    {"PROFILE_NAME", "run", "base name of the files, slugged to [A-Za-z0-9._-]", "any text",
     [](const char* s, C* c) { return c->name = slug(s), true; }},
    {"PROFILE_CPU_HZ", "100", "CPU samples per second of CPU time per thread; 0 = no CPU profile",
     "an integer from 0 to 10000", [](const char* s, C* c) { return parse_u32(s, 0, 10000, &c->cpu_hz); }},
    {"PROFILE_HEAP_SAMPLE", "524288",
     "mean bytes between heap samples, rounded to a power of two; 0 = no heap profile",
     "an integer number of bytes from 0 to 1099511627776",
     [](const char* s, C* c) { return parse_u64(s, uint64_t(1) << 40, &c->heap_sample); }},
    {"PROFILE_WAIT_SAMPLE", "100000000", "nanoseconds of waiting per wait-profile sample; 0 = no wait profile",
     "an integer number of nanoseconds from 0 to 60000000000",
     [](const char* s, C* c) { return parse_u64(s, 60000000000ull, &c->wait_sample_ns); }},
    {"PROFILE_STOP_TIMEOUT", "10", "seconds a stop may spend writing before it gives up",
     "seconds from 0.1 to 3600 (e.g. 10 or 2.5)", [](const char* s, C* c) {
       uint64_t v = 0;
       return parse_seconds_ms(s, &v) && v >= 100 && (c->stop_timeout_ms = v, true);
     }},
    {"PROFILE_PEAK_FLOOR", "64M", "heap in use below which no NAME.heap-peak.pprof is written; 0 = none",
     "bytes from 0 to 2^50, with an optional suffix K, M or G (e.g. 64M)",
     [](const char* s, C* c) { return parse_bytes(s, uint64_t(1) << 50, &c->peak_floor); }},
    {"PROFILE_PEAK_AFTER", "10", "seconds an image runs before its first heap-peak file",
     "seconds from 0 to 86400 (e.g. 10 or 2.5)", [](const char* s, C* c) {
       uint64_t v = 0;
       return parse_milli(s, 86400, &v) && v <= 86400000 && (c->peak_after_ms = v, true);
     }},
    {"PROFILE_INTERVAL", "0", "a snapshot every such duration while running; 0 = none",
     "a duration from 1s to 30d with its unit (e.g. 30s, 5m, 1h), or 0", [](const char* s, C* c) {
       uint64_t v = 0;
       if (std::strcmp(s, "0") == 0) return c->interval_ms = 0, true;
       return parse_duration_ms(s, &v) && v >= 1000 && v <= 30 * 86400000ull && (c->interval_ms = v, true);
     }},
    {"PROFILE_SNAPSHOT_SIGNAL", "0", "a signal that asks for a snapshot; 0 = none",
     "a signal name such as USR2, HUP or RTMIN+3 (one that ends a process by default, "
     "not a fault, not the shim's own SIGRTMAX-4)",
     [](const char* s, C* c) {
       c->snapshot_signal = std::strcmp(s, "0") == 0 ? 0 : snapshot_signal_number(s);
       return c->snapshot_signal != 0 || std::strcmp(s, "0") == 0;
     }},
    {"PROFILE_SNAPSHOT_TRIGGER", "0", "1: touching DIR/NAME.snapshot asks for a snapshot (polled each second)",
     "0 or 1", [](const char* s, C* c) {
       return (std::strcmp(s, "0") == 0 || std::strcmp(s, "1") == 0) && (c->snapshot_trigger = s[0] == '1', true);
     }},
    {"PROFILE_SNAPSHOT_KEEP", "10", "numbered snapshot sets left on disk, oldest removed first",
     "an integer from 1 to 100000", [](const char* s, C* c) { return parse_u32(s, 1, 100000, &c->snapshot_keep); }},
    {"PROFILE_MEM_HZ", "0", "rows of NAME.mem.tsv per second besides one per snapshot and peak",
     "rows per second from 0 to 100, at most 3 decimals (e.g. 1 or 0.1)", [](const char* s, C* c) {
       uint64_t v = 0;
       return parse_milli(s, 100, &v) && v <= 100000 && (c->mem_millihz = v, true);
     }},
    {"PROFILE_LOG", "(unset: stderr)",
      "a file every image's summary line is appended to (relative: in DIR); stderr keeps only NAME's",
      "a file's path, absolute or relative to PROFILE_DIR (e.g. profshim.log)", [](const char* s, C* c) {
        size_t n = std::strlen(s);
        if (n && (s[n - 1] == '/' || std::strcmp(s, ".") == 0 || std::strcmp(s, "..") == 0)) return false;
        return c->log = s, true;
      }},
    {"PROFILE_ONLY", "(unset: every image)",
      "program names, comma-separated: only images of these programs are profiled, the others stay inert",
      "program names separated by commas, as python3,cc1plus: no empty name, no '/', no space",
      [](const char* s, C* c) { return (!*s || valid_only(s)) && (c->only = s, true); }},
    {"PROFILE_FORKS", "merge",
     "merge: a forked child that does not exec hands its samples to its parent image's files (pid label); "
     "own: it writes files of its own",
     "merge or own", [](const char* s, C* c) {
       return (std::strcmp(s, "merge") == 0 || std::strcmp(s, "own") == 0) && (c->forks_own = s[0] == 'o', true);
     }},
    {"PROFILE_FORKS_SPOOL", "64M",
     "size of the file forked children hand their samples over in (a sparse file in DIR while the image runs); "
     "when it is full a child writes its own files",
     "bytes from 8K to 2^40, with an optional suffix K, M or G (e.g. 64M)", [](const char* s, C* c) {
       return parse_bytes(s, uint64_t(1) << 40, &c->forks_spool) && c->forks_spool >= 8192;
     }},
};

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
  // The defaults first, so that an inert image's Config is the same.
  for (const Var& v : kVars)
    if (v.def[0] != '(') v.set(v.def, &c);
  const char* dir = get("PROFILE_DIR");
  if (dir && *dir) {
    for (const Var& v : kVars) {
      const char* s = get(v.name);
      if (s && !v.set(s, &c)) return bad(v.name, s, v.want);
    }
  }
  c.heap_lg_sample = lg_for_sample(c.heap_sample);
  *out = c;
  return "";
}

}  // namespace config
