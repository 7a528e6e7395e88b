// config: the one table of PROFILE_* variables, their defaults and their
// strict parsers, plus the slug rule and the output file names. Pure
// functions: the only input is a getenv-like callback, the only output a
// Config or an error message (docs/CONFIG.md: a malformed value is a setup error).
#pragma once
#include <cstdint>
#include <string>

namespace config {

// Every default is config.cc's table's (parse() applies it): a Config not
// filled by parse() is all zeros.
struct Config {
  bool active = false;          // PROFILE_DIR set and non-empty
  std::string dir;              // PROFILE_DIR, as given
  std::string name;             // PROFILE_NAME, slugged
  uint32_t cpu_hz = 0;          // PROFILE_CPU_HZ; 0 = no CPU profile
  uint64_t heap_sample = 0;     // PROFILE_HEAP_SAMPLE as asked; 0 = no heap profile
  unsigned heap_lg_sample = 0;  // log2 of the period jemalloc really uses
  uint64_t stop_timeout_ms = 0;  // PROFILE_STOP_TIMEOUT
  uint64_t wait_sample_ns = 0;   // PROFILE_WAIT_SAMPLE; 0 = no wait profile
  // While running (docs/CONFIG.md, "While the program runs").
  uint64_t peak_floor = 0;       // PROFILE_PEAK_FLOOR; 0 = no heap-peak file
  uint64_t peak_after_ms = 0;    // PROFILE_PEAK_AFTER
  uint64_t interval_ms = 0;      // PROFILE_INTERVAL; 0 = no periodic snapshot
  int snapshot_signal = 0;       // PROFILE_SNAPSHOT_SIGNAL; 0 = none
  bool snapshot_trigger = false;  // PROFILE_SNAPSHOT_TRIGGER: poll DIR/NAME.snapshot
  uint32_t snapshot_keep = 0;     // PROFILE_SNAPSHOT_KEEP: numbered sets left on disk
  uint64_t mem_millihz = 0;       // PROFILE_MEM_HZ x 1000; 0 = rows only per snapshot and peak
  // A process tree (docs/CONFIG.md, "Process trees").
  std::string log;   // PROFILE_LOG: summary lines go there; relative to dir; "" = none
  std::string only;  // PROFILE_ONLY: program names, comma-separated; "" = every image
  bool forks_own = false;     // PROFILE_FORKS=own: fork children write their own files
  uint64_t forks_spool = 0;   // PROFILE_FORKS_SPOOL: the hand-over area's bytes (forks.h)
};

using Getenv = const char* (*)(const char*);

// Fills *out from the environment. Returns "" on success, else one sentence
// naming the variable, the value and what is accepted.
std::string parse(Getenv get, Config* out);

// The slug (docs/CONFIG.md): keeps [A-Za-z0-9._-], other runs become one '-', leading
// '.', '-', '_' dropped, at most 128 bytes, empty becomes "run".
std::string slug(const std::string& in);

// The power of two jemalloc will sample at for a requested mean: the nearest
// in log space, ties up (docs/CONFIG.md).
unsigned lg_for_sample(uint64_t bytes);

// A signal named as PROFILE_SNAPSHOT_SIGNAL takes it ("USR2", "SIGUSR2",
// "RTMIN+3"): one whose default action ends the process and that is neither
// a fault nor the shim's own; 0 if name is not one.
int snapshot_signal_number(const char* name);

// Whether a program name is one of PROFILE_ONLY's comma-separated list.
bool only_lists(const std::string& only, const char* name);

// The PROFILE_* names in envp that are not ours (a misspelling such as
// PROFILE_CPU_HERTZ), comma-separated; "" if none.
std::string unknown_vars(const char* const* envp);

// The table itself, one row per variable (config.cc): for the parser, for
// scripts/profshim --help (cli/options_dump.cc) and for the docs' checks.
struct Var {
  const char* name;
  const char* def;   // a value of the variable; "(...)": no value, a description
  const char* help;  // what it does
  const char* want;  // what it accepts, as the error and --help say it
  bool (*set)(const char* value, Config* c);  // strict; false if malformed
};
const Var* vars(int* n);

}  // namespace config
