// heap_dump: parses jemalloc's heap_v2 text; see heap_dump.h.
#include "heap_dump.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace heap_dump {
namespace {

// Reads an unsigned decimal and what follows it must be `sep`; advances *p.
bool number(const char** p, char sep, double* out) {
  char* end = nullptr;
  unsigned long long v = strtoull(*p, &end, 10);
  if (end == *p || *end != sep) return false;
  *out = double(v);
  *p = end + 1;
  while (**p == ' ') ++*p;
  return true;
}

// "  t*: N: S [AN: AS]" — the whole-process totals line of a stack. Parsed
// by hand: sscanf on a pointer into the dump measures the rest of the dump
// on every call, which made a large dump quadratic.
bool parse_totals(const char* p, double v[4]) {
  while (*p == ' ') ++p;
  if (strncmp(p, "t*:", 3) != 0) return false;
  p += 3;
  while (*p == ' ') ++p;
  return number(&p, ':', &v[0]) && number(&p, ' ', &v[1]) && *p++ == '[' && number(&p, ':', &v[2]) &&
         number(&p, ']', &v[3]);
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
  if (text.compare(0, 8, "heap_v2/") != 0 || (period = strtoull(text.c_str() + 8, nullptr, 10)) == 0) {
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
