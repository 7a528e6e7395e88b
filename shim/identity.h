// identity: who this image is, as its profiles and its summary line record
// it, so that `go tool pprof -comments`/`-tags`, a log reader and
// `profshim ls` can tell which of a build's hundred compiles was the slow
// one: pid, parent pid, executable, command line (bounded) and start time.
// Read at the stop (so a program that retitles itself, as PostgreSQL's
// backends do, is recorded as it called itself last); not signal-safe, but
// takes no lock another thread could hold (no stdio, no time zone).
#pragma once
#include <stdint.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace identity {

struct Identity {
  pid_t pid = 0, ppid = 0;
  std::string exe;       // the executable's path, as /proc/self/exe names it
  std::string program;   // its base name
  std::string argv;      // the command line, arguments quoted where needed, at most kArgvMax bytes
  uint64_t start_real_ns = 0;
};

constexpr size_t kArgvMax = 1024;

Identity read(pid_t pid, uint64_t start_real_ns);
// The profile's comments: "profshim: pid 14601 (parent 14597) program /usr/lib/gcc/…/cc1",
// "profshim: argv cc1 -quiet …", "profshim: started 2026-11-30T16:50:01.123Z".
std::vector<std::string> comments(const Identity& id);
// For the summary line: "pid 14601 (parent 14597): cc1 -quiet -O2 …", the
// command line cut to about 100 bytes.
std::string brief(const Identity& id);
// /proc/PID/cmdline's NUL-separated arguments as one line, each quoted
// where a shell would need it, cut to kArgvMax bytes.
std::string argv_text(const std::string& cmdline);
// "2026-11-30T16:50:01.123Z" (UTC).
std::string iso_utc(uint64_t real_ns);

}  // namespace identity
