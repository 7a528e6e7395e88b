// options_dump: prints the shim's option table (shim/config.cc) as
// tab-separated lines "VARIABLE<TAB>DEFAULT<TAB>HELP; accepts ACCEPTED", so that `profshim
// --help` is generated from the table the shim parses, never a copy of it.
// Built and run by the Makefile into build/profshim-options.tsv.
//
// options_dump --check: the shim's parsers on this process's environment,
// for `profshim check` (cli/check_cmd.py), which gives it the environment
// to judge. Lines "setup<TAB>ERROR" (what the shim itself would stop at,
// empty when nothing), then "VARIABLE<TAB>ok|error<TAB>VALUE or ERROR" for
// each variable of the table that is set, each parsed on its own so that
// every malformed one is named, not only the first; then "unknown<TAB>NAMES".
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "config.h"

extern char** environ;

namespace {

const char* g_var = nullptr;  // the one variable parsed besides PROFILE_DIR

const char* one_var(const char* name) {
  if (std::strcmp(name, "PROFILE_DIR") == 0) {
    const char* d = getenv(name);
    return d && *d ? d : "/";  // active, so that the variable is read at all
  }
  return std::strcmp(name, g_var) == 0 ? getenv(name) : nullptr;
}

std::string ms_text(uint64_t ms) {
  char b[48];
  std::snprintf(b, sizeof b, "%llu.%03llu", (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000));
  std::string s(b);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s + " s";
}

// One field of a line: a value may hold a tab or a newline.
std::string field(std::string s) {
  for (char& ch : s)
    if (ch == '\t' || ch == '\n') ch = ' ';
  return s;
}

// What the shim took the variable to mean, in the words of docs/CONFIG.md.
std::string meaning(const char* var, const config::Config& c) {
  std::string v = var;
  auto n = [](unsigned long long x) { return std::to_string(x); };
  if (v == "PROFILE_DIR") return c.dir;
  if (v == "PROFILE_NAME") return "files " + c.name + ".*";
  if (v == "PROFILE_CPU_HZ") return c.cpu_hz ? n(c.cpu_hz) + " Hz" : "no CPU profile";
  if (v == "PROFILE_HEAP_SAMPLE")
    return c.heap_sample ? "every " + n(1ull << c.heap_lg_sample) + " bytes (2^" + n(c.heap_lg_sample) + ")"
                         : "no heap profile";
  if (v == "PROFILE_WAIT_SAMPLE") return c.wait_sample_ns ? n(c.wait_sample_ns) + " ns" : "no wait profile";
  if (v == "PROFILE_STOP_TIMEOUT") return ms_text(c.stop_timeout_ms);
  if (v == "PROFILE_PEAK_FLOOR") return c.peak_floor ? n(c.peak_floor) + " bytes" : "no heap-peak file";
  if (v == "PROFILE_PEAK_AFTER") return ms_text(c.peak_after_ms);
  if (v == "PROFILE_INTERVAL") return c.interval_ms ? "a snapshot every " + ms_text(c.interval_ms) : "off";
  if (v == "PROFILE_SNAPSHOT_SIGNAL")
    return c.snapshot_signal ? "signal " + n(c.snapshot_signal) + " (" + strsignal(c.snapshot_signal) + ")" : "none";
  if (v == "PROFILE_SNAPSHOT_TRIGGER") return c.snapshot_trigger ? "on: touch DIR/NAME.snapshot" : "off";
  if (v == "PROFILE_SNAPSHOT_KEEP") return n(c.snapshot_keep) + " sets";
  if (v == "PROFILE_MEM_HZ") return c.mem_millihz ? n(c.mem_millihz) + " rows per 1000 s" : "rows at events only";
  if (v == "PROFILE_LOG")
    return c.log.empty() ? "every summary line on stderr"
                         : "summary lines appended to " + (c.log[0] == '/' ? c.log : "DIR/" + c.log);
  if (v == "PROFILE_ONLY") return c.only.empty() ? "every image" : "only images of " + c.only;
  return "accepted";  // a variable newer than this list: the shim takes it
}

int check() {
  config::Config c;
  std::printf("setup\t%s\n",
              field(config::parse([](const char* n) -> const char* { return getenv(n); }, &c)).c_str());
  int n = 0;
  const config::Var* v = config::vars(&n);
  for (int i = 0; i < n; ++i) {
    if (!getenv(v[i].name)) continue;
    g_var = v[i].name;
    std::string err = config::parse(one_var, &c);
    std::printf("%s\t%s\t%s\n", v[i].name, err.empty() ? "ok" : "error",
                field(err.empty() ? meaning(v[i].name, c) : err).c_str());
  }
  std::printf("unknown\t%s\n", field(config::unknown_vars(environ)).c_str());
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--check") == 0) return check();
  int n = 0;
  const config::Var* v = config::vars(&n);
  for (int i = 0; i < n; ++i) {
    for (const char* s : {v[i].name, v[i].def, v[i].help, v[i].want})
      if (std::strpbrk(s, "\t\n")) {
        std::fprintf(stderr, "options_dump: %s: a tab or newline in the table\n", v[i].name);
        return 1;
      }
    std::printf("%s\t%s\t%s; accepts %s\n", v[i].name, v[i].def, v[i].help, v[i].want);
  }
  return std::fflush(stdout) == 0 && n > 0 ? 0 : 1;
}
