// procmaps: parses the text of /proc/<pid>/maps into one record per line, and
// answers questions about those records.
#include "procmaps.h"

#include <stdint.h>
#include <string.h>

#include <algorithm>

namespace procmaps {

namespace {

// By hand, not sscanf: every image parses its maps at setup and at its stop,
// and sscanf's per-call locale and stream setup made that a measurable part
// of a short image's cost.
bool number(const char*& p, const char* end, int base, uint64_t* out) {
  const char* first = p;
  uint64_t v = 0;
  for (; p < end; ++p) {
    int d = *p >= '0' && *p <= '9' ? *p - '0' : base == 16 && *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
    if (d < 0) break;
    if (v > (UINT64_MAX - uint64_t(d)) / uint64_t(base)) return false;
    v = v * uint64_t(base) + uint64_t(d);
  }
  *out = v;
  return p > first;
}

bool expect(const char*& p, const char* end, char c) {
  if (p >= end || *p != c) return false;
  ++p;
  return true;
}

bool parse_line(const char* p, const char* end, Line* out) {
  uint64_t major = 0, minor = 0;
  if (!number(p, end, 16, &out->start) || !expect(p, end, '-') || !number(p, end, 16, &out->end) ||
      !expect(p, end, ' ') || end - p < 5 || p[4] != ' ')
    return false;
  memcpy(out->perms, p, 4);
  out->perms[4] = 0;
  p += 5;
  if (!number(p, end, 16, &out->offset) || !expect(p, end, ' ') || !number(p, end, 16, &major) ||
      !expect(p, end, ':') || !number(p, end, 16, &minor) || !expect(p, end, ' ') ||
      !number(p, end, 10, &out->inode) || major > UINT32_MAX || minor > UINT32_MAX ||
      out->end <= out->start || strlen(out->perms) != 4)
    return false;
  out->dev_major = unsigned(major), out->dev_minor = unsigned(minor);
  if (p < end && *p != ' ') return false;
  // Paths may contain spaces (" (deleted)"); only the leading padding goes.
  while (p < end && *p == ' ') ++p;
  out->path.assign(p, size_t(end - p));
  return true;
}

}  // namespace

std::vector<Line> parse(const std::string& text) {
  std::vector<Line> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    Line l;
    if (parse_line(text.data() + pos, text.data() + nl, &l)) lines.push_back(std::move(l));
    pos = nl + 1;
  }
  return lines;
}

bool readable(const std::vector<Line>& lines, uint64_t addr, uint64_t size) {
  // The kernel lists mappings by address: the one that can hold addr is the
  // last that starts at or below it (a stop reads hundreds of headers).
  auto it = std::upper_bound(lines.begin(), lines.end(), addr,
                             [](uint64_t a, const Line& l) { return a < l.start; });
  if (it == lines.begin()) return false;
  const Line& l = *--it;
  return l.readable() && addr < l.end && size <= l.end - addr;
}

}  // namespace procmaps
