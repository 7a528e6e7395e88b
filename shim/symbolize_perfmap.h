// symbolize_perfmap: names for generated code from the process's perf map,
// /tmp/perf-PID.map, the text file JITs write for perf (Node with
// --perf-basic-prof, LuaJIT, BEAM with +JPperf true, Java through an
// agent): one "START SIZE NAME" line per piece of code, START and SIZE in
// hex. Read at the stop, once, only if an address lies in no file's
// mapping, and only if the file is the process's own user's (perf's rule:
// another user could name our code). A later line wins over the earlier
// ones it overlaps (a JIT reuses its memory). Not signal-safe.
#pragma once
#include <stdint.h>

#include <map>
#include <string>

namespace symbolize {

class PerfMap {
 public:
  // The name of the code at pc, or nullptr. Reads the file at the first call.
  const std::string* find(uint64_t pc);

 private:
  void load();
  void add(uint64_t start, uint64_t end, std::string name);
  bool loaded_ = false;
  struct Code {
    uint64_t end;
    std::string name;
  };
  std::map<uint64_t, Code> by_start_;
};

}  // namespace symbolize
