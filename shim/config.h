// config: the one table of PROFILE_* variables, their defaults and their
// strict parsers, plus the slug rule and the output file names. Pure
// functions: the only input is a getenv-like callback, the only output a
// Config or an error message (SPEC: a malformed value is a setup error).
#pragma once
#include <cstdint>
#include <string>

namespace config {

struct Config {
  bool active = false;          // PROFILE_DIR set and non-empty
  std::string dir;              // PROFILE_DIR, as given
  std::string name = "run";     // PROFILE_NAME, slugged
  uint32_t cpu_hz = 100;        // PROFILE_CPU_HZ; 0 = no CPU profile
  uint64_t heap_sample = 524288;  // PROFILE_HEAP_SAMPLE as asked; 0 = no heap profile
  unsigned heap_lg_sample = 19;   // log2 of the period jemalloc really uses
  uint64_t stop_timeout_ms = 10000;  // PROFILE_STOP_TIMEOUT
  uint64_t wait_sample_ns = 100000000;  // PROFILE_WAIT_SAMPLE (100 ms, docs/CONFIG.md); 0 = no wait profile
};

using Getenv = const char* (*)(const char*);

// Fills *out from the environment. Returns "" on success, else one sentence
// naming the variable, the value and what is accepted.
std::string parse(Getenv get, Config* out);

// SPEC's slug: keeps [A-Za-z0-9._-], other runs become one '-', leading
// '.', '-', '_' dropped, at most 128 bytes, empty becomes "run".
std::string slug(const std::string& in);

// The power of two jemalloc will sample at for a requested mean: the nearest
// in log space, ties up (docs/CONFIG.md).
unsigned lg_for_sample(uint64_t bytes);

// The PROFILE_* names in envp that are not ours (a misspelling such as
// PROFILE_CPU_HERTZ), comma-separated; "" if none.
std::string unknown_vars(const char* const* envp);

// One row per variable, for scripts/profshim --help and docs/ checks.
struct Var { const char* name; const char* def; const char* help; };
const Var* vars(int* n);

}  // namespace config
