// procmaps: parses the text of /proc/<pid>/maps into one record per line, and
// answers questions about those records. Pure text handling (no reads of
// /proc here), so it can parse text captured earlier and be tested on
// literal strings.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace procmaps {

struct Line {
  uint64_t start = 0, end = 0, offset = 0, inode = 0;
  unsigned dev_major = 0, dev_minor = 0;
  char perms[5] = {0};  // e.g. "r-xp"
  std::string path;     // as shown, e.g. "/usr/lib/libc.so.6", "[vdso]",
                        // "/x (deleted)", or empty for anonymous memory
  bool readable() const { return perms[0] == 'r'; }
  bool executable() const { return perms[2] == 'x'; }
  // A regular file mapping (not anonymous, not [vdso]/[heap]/...).
  bool is_file() const { return !path.empty() && path[0] == '/' && inode != 0; }
  // Another mapping of the same file (device, inode and path).
  bool same_file(const Line& o) const {
    return is_file() && o.is_file() && inode == o.inode && dev_major == o.dev_major &&
           dev_minor == o.dev_minor && path == o.path;
  }
};

// Lines that do not parse are skipped: the kernel's format is fixed, so a bad
// line means truncated text, and the rest is still worth having.
std::vector<Line> parse(const std::string& text);

// Whether [addr, addr + size) lies inside one readable line; lines in the
// kernel's order (by address), as parse() returns them.
bool readable(const std::vector<Line>& lines, uint64_t addr, uint64_t size);

}  // namespace procmaps
