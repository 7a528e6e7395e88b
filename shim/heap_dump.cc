// heap_dump: parses jemalloc's heap_v2 text; see heap_dump.h.
#include "heap_dump.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace heap_dump {
namespace {

// "  t*: N: S [AN: AS]" — the whole-process totals line of a stack.
bool parse_totals(const char* p, double v[4]) {
  unsigned long long n, s, an, as;
  if (sscanf(p, " t*: %llu: %llu [%llu: %llu]", &n, &s, &an, &as) != 4) return false;
  v[0] = double(n), v[1] = double(s), v[2] = double(an), v[3] = double(as);
  return true;
}

bool parse_stack(const char* p, std::vector<uint64_t>* pcs) {
  pcs->clear();
  ++p;  // '@'
  for (;;) {
    while (*p == ' ') ++p;
    if (*p == 0 || *p == '\n') break;
    char* end = nullptr;
    uint64_t pc = strtoull(p, &end, 16);
    if (end == p) return false;
    pcs->push_back(pc);
    p = end;
  }
  return !pcs->empty();
}

}  // namespace

void unsample(double n, double s, uint64_t period, double* n_out, double* s_out) {
  if (n <= 0 || period <= 1) {
    *n_out = n, *s_out = s;
    return;
  }
  double ratio = (s / n) / double(period);
  double scale = 1.0 / (1.0 - exp(-ratio));
  *n_out = n * scale, *s_out = s * scale;
}

bool parse(const std::string& text, Dump* out, std::string* err) {
  out->records.clear();
  unsigned long long period = 0;
  if (sscanf(text.c_str(), "heap_v2/%llu", &period) != 1) {
    *err = "not a jemalloc heap_v2 dump";
    return false;
  }
  out->period = period;
  Record cur;
  bool in_stack = false;
  size_t pos = text.find('\n');
  while (pos != std::string::npos && pos + 1 < text.size()) {
    const char* line = text.c_str() + pos + 1;
    pos = text.find('\n', pos + 1);
    if (strncmp(line, "MAPPED_LIBRARIES:", 17) == 0) break;
    if (line[0] == '@') {
      in_stack = parse_stack(line, &cur.pcs);
      continue;
    }
    double v[4];
    if (!in_stack || strncmp(line, "  t*:", 5) != 0 || !parse_totals(line, v)) continue;
    in_stack = false;
    unsample(v[0], v[1], period, &cur.inuse_objects, &cur.inuse_space);
    unsample(v[2], v[3], period, &cur.alloc_objects, &cur.alloc_space);
    out->records.push_back(cur);
  }
  return true;
}

}  // namespace heap_dump
