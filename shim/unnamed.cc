// unnamed: the summary's note on a profile without names; see unnamed.h.
#include "unnamed.h"

#include <map>

namespace unnamed {

std::string hint(const std::vector<Leaf>& leaves, const std::vector<std::string>& paths) {
  uint64_t total = 0, bare = 0;
  std::map<int, uint64_t> by_mapping;
  for (const auto& l : leaves) {
    total += l.weight;
    if (l.named) continue;
    bare += l.weight;
    by_mapping[l.mapping] += l.weight;
  }
  // A profile of a few milliseconds has nothing worth naming.
  if (total < kMinWeight || bare * 2 <= total) return "";
  int worst = -1;
  uint64_t most = 0;
  for (const auto& [m, w] : by_mapping)
    if (w > most) worst = m, most = w;
  std::string s = "cpu " + std::to_string((bare * 100 + total / 2) / total) + "% unnamed, most in ";
  if (worst < 0 || size_t(worst) >= paths.size() || paths[worst].empty() || paths[worst][0] != '/')
    return s + "code of no file (generated code: a JIT's)";
  const std::string& p = paths[worst];
  return s + p + ": its package's debug symbols would name it (dpkg -S " + p + ", then PACKAGE-dbgsym or PACKAGE-dbg)";
}

}  // namespace unnamed
