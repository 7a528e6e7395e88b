// same_results: one lookup through a Session with a symbol cache, and
// whether two lookups gave the same frames, field by field (the symbol
// cache's and the symbol table's tests against a fresh libdw).
#pragma once
#include <string>
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

struct Run {
  std::vector<symbolize::Result> results;
  symbolize::CacheStats stats;
  std::string error;
};

// Every run of a test reads the same maps text (libdw, loaded by the first
// lookup, would shift the mappings' numbers otherwise).
inline Run run(const std::vector<uint64_t>& addrs, const std::string& dir, const std::string& text) {
  symbolize::Session s(text, true, dir);
  Run r;
  s.lookup(addrs, &r.results);
  s.keep();
  r.stats = s.cache_stats();
  r.error = s.error();
  return r;
}
