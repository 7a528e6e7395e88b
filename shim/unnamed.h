// unnamed: when most of a CPU profile has no function names, which module
// lacks them and how a Debian user gets them, for the summary line. Pure.
#pragma once
#include <stdint.h>

#include <string>
#include <vector>

namespace unnamed {

struct Leaf {
  int mapping = -1;  // index into the mappings' paths, -1 if none
  bool named = false;
  uint64_t weight = 0;  // the sample's cpu/nanoseconds
};

constexpr uint64_t kMinWeight = 20000000;  // 20 ms of CPU

// "" unless the profile holds kMinWeight or more and more than half the weight is in unnamed leaves; else e.g.
// "cpu 62% unnamed, most in /usr/bin/gzip: its package's debug symbols
// would name it (dpkg -S /usr/bin/gzip, then PACKAGE-dbgsym or PACKAGE-dbg)".
std::string hint(const std::vector<Leaf>& leaves, const std::vector<std::string>& mapping_paths);

}  // namespace unnamed
