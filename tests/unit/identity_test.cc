// identity: the command line as the comments and the summary line show it,
// and the start time's calendar date without the C library's time zone code.
#include "identity.h"

#include <string>

#include "check.h"

TEST(plain_arguments_as_they_are) {
  CHECK_EQ(identity::argv_text(std::string("cc1plus\0-quiet\0-O2\0x/y.cc\0", 26)),
           std::string("cc1plus -quiet -O2 x/y.cc"));
}

TEST(arguments_quoted_where_a_shell_needs_it) {
  CHECK_EQ(identity::argv_text(std::string("sh\0-c\0echo 'a' $HOME\0\0", 22)),
           std::string("sh -c 'echo '\\''a'\\'' $HOME' ''"));
  CHECK_EQ(identity::argv_text(std::string("p\0two\nlines\0", 12)), std::string("p 'two\\nlines'"));
}

TEST(a_retitled_programs_padding_is_not_arguments) {
  // redis-server after setproctitle: its title, then the old arguments' bytes as NULs.
  CHECK_EQ(identity::argv_text(std::string("redis-server *:7777\0\0\0\0\0\0\0", 26)),
           std::string("'redis-server *:7777'"));
  // Two real empty arguments at the end: "a\0\0\0" is a, '', '' (three NULs).
  CHECK_EQ(identity::argv_text(std::string("a\0\0", 3)), std::string("a ''"));
}

TEST(long_command_lines_are_cut) {
  std::string raw = "prog";
  for (int i = 0; i < 400; ++i) raw += std::string("\0arg", 4);
  std::string t = identity::argv_text(raw);
  CHECK(t.size() <= identity::kArgvMax + 3);
  CHECK(t.size() >= identity::kArgvMax - 8);
  CHECK(t.compare(t.size() - 3, 3, "...") == 0);
}

TEST(cuts_never_split_a_utf8_character) {
  // Quoted (not plain ASCII): "'" and 1022 bytes, then "é" straddles the limit.
  std::string raw(identity::kArgvMax - 2, 'a');
  raw += "\xc3\xa9\xc3\xa9";
  std::string t = identity::argv_text(raw);
  CHECK_EQ(t, "'" + std::string(identity::kArgvMax - 2, 'a') + "...");
}

TEST(start_time_in_utc) {
  CHECK_EQ(identity::iso_utc(0), std::string("1970-01-01T00:00:00.000Z"));
  // 2026-11-30T16:50:01.123Z, and a leap day.
  CHECK_EQ(identity::iso_utc(1796057401123000000ull), std::string("2026-11-30T16:50:01.123Z"));
  CHECK_EQ(identity::iso_utc(951782400000000000ull + 999999999ull), std::string("2000-02-29T00:00:00.999Z"));
}
