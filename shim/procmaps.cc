// procmaps: parses the text of /proc/<pid>/maps into one record per line, and
// answers questions about those records.
#include "procmaps.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace procmaps {

static bool parse_line(const std::string& s, Line* out) {
  int path_at = -1;
  // %n after the inode points at the (space-padded) path column.
  if (std::sscanf(s.c_str(), "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n",
                  &out->start, &out->end, out->perms, &out->offset, &out->dev_major,
                  &out->dev_minor, &out->inode, &path_at) < 7 ||
      path_at < 0 || out->end <= out->start || std::strlen(out->perms) != 4)
    return false;
  // Paths may contain spaces (" (deleted)"); only the leading padding goes.
  size_t p = static_cast<size_t>(path_at);
  while (p < s.size() && s[p] == ' ') ++p;
  out->path = s.substr(p);
  return true;
}

std::vector<Line> parse(const std::string& text) {
  std::vector<Line> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    Line l;
    if (parse_line(text.substr(pos, nl - pos), &l)) lines.push_back(std::move(l));
    pos = nl + 1;
  }
  return lines;
}

bool readable(const std::vector<Line>& lines, uint64_t addr, uint64_t size) {
  for (const auto& l : lines)
    if (l.readable() && addr >= l.start && addr < l.end && size <= l.end - addr) return true;
  return false;
}

}  // namespace procmaps
