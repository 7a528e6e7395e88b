// same_results: whether two lookups gave the same frames, field by field
// (the symbol cache's and the symbol table's tests against a fresh libdw).
#pragma once
#include <vector>

#include "symbolize.h"

inline bool same(const std::vector<symbolize::Result>& a, const std::vector<symbolize::Result>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].mapping != b[i].mapping || a[i].inlines_known != b[i].inlines_known ||
        a[i].frames.size() != b[i].frames.size())
      return false;
    for (size_t k = 0; k < a[i].frames.size(); ++k) {
      const pprof::Frame &x = a[i].frames[k], &y = b[i].frames[k];
      if (x.name != y.name || x.system_name != y.system_name || x.file != y.file || x.line != y.line ||
          x.start_line != y.start_line)
        return false;
    }
  }
  return true;
}
