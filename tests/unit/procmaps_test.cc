// procmaps_test: the hand-written maps parser reads every line of a real
// /proc/self/maps as an independent strtoull-based reading does, keeps
// paths with spaces, and skips lines that are not the kernel's format.
#include "procmaps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fstream>
#include <sstream>
#include <string>

#include "check.h"
#include "test_files.h"

namespace {

// The reference: the columns split on spaces and read with strtoull.
procmaps::Line reference(const std::string& line) {
  procmaps::Line l;
  const char* p = line.c_str();
  char* e;
  l.start = strtoull(p, &e, 16);
  l.end = strtoull(e + 1, &e, 16);
  memcpy(l.perms, e + 1, 4);
  l.offset = strtoull(e + 6, &e, 16);
  l.dev_major = unsigned(strtoul(e + 1, &e, 16));
  l.dev_minor = unsigned(strtoul(e + 1, &e, 16));
  l.inode = strtoull(e + 1, &e, 10);
  while (*e == ' ') ++e;
  l.path = e;
  return l;
}

TEST(every_line_of_real_maps_as_the_reference_reads_it) {
  std::string text = slurp("/proc/self/maps");
  std::vector<procmaps::Line> got = procmaps::parse(text);
  std::istringstream in(text);
  std::string line;
  size_t i = 0, n = 0;
  while (std::getline(in, line)) {
    ++n;
    procmaps::Line want = reference(line);
    CHECK(i < got.size());
    if (i >= got.size()) break;
    const procmaps::Line& g = got[i++];
    CHECK_EQ(g.start, want.start);
    CHECK_EQ(g.end, want.end);
    CHECK_EQ(std::string(g.perms), std::string(want.perms));
    CHECK_EQ(g.offset, want.offset);
    CHECK_EQ(g.dev_major, want.dev_major);
    CHECK_EQ(g.dev_minor, want.dev_minor);
    CHECK_EQ(g.inode, want.inode);
    CHECK_EQ(g.path, want.path);
  }
  CHECK(n > 5);
  CHECK_EQ(got.size(), n);
}

TEST(paths_with_spaces_and_anonymous_lines) {
  auto l = procmaps::parse(
      "7f0000000000-7f0000001000 r-xp 00001000 fd:01 123456                     /tmp/a b (deleted)\n"
      "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
      "7ffe00000000-7ffe00001000 ---p 00000000 00:00 0\n");
  CHECK_EQ(l.size(), size_t(3));
  if (l.size() != 3) return;
  CHECK_EQ(l[0].path, std::string("/tmp/a b (deleted)"));
  CHECK_EQ(l[0].offset, uint64_t(0x1000));
  CHECK_EQ(l[0].dev_major, 0xfdu);
  CHECK_EQ(l[0].inode, uint64_t(123456));
  CHECK(l[0].executable() && l[0].is_file());
  CHECK_EQ(l[1].path, std::string("[stack]"));
  CHECK(!l[1].is_file());
  CHECK_EQ(l[2].path, std::string(""));
  CHECK(!l[2].readable());
}

TEST(malformed_lines_are_skipped) {
  auto l = procmaps::parse(
      "garbage\n"
      "7f0000001000-7f0000000000 r-xp 00000000 fd:01 1 /backwards\n"  // end before start
      "7f0000000000-7f0000001000 r-x 00000000 fd:01 1 /short-perms\n"
      "7f0000000000-7f0000001000 r-xp 00000000 fd01 1 /no-colon\n"
      "7f0000000000-7f0000001000 r-xp 00000000 fd:01 12x /inode-junk\n"
      "7f0000000000-7f0000001000 r-xp 00000000 fd:01\n"  // truncated
      "fffffffffffffffff-1 r-xp 00000000 fd:01 1 /overflow\n"
      "7f0000000000-7f0000001000 r-xp 00000000 fd:01 7 /good\n");
  CHECK_EQ(l.size(), size_t(1));
  if (l.size() == 1) CHECK_EQ(l[0].path, std::string("/good"));
}

}  // namespace
