// mappings_test: a mapping's has_* flags are set only when every location
// looked up in it has that kind of information (pprof trusts the flags and
// will not symbolize a flagged mapping itself); libraries that are there only
// for the shim are told apart from the program's.
#include <fstream>
#include <sstream>
#include <string>

#include "check.h"
#include "symbolize.h"

namespace {

symbolize::Result located(int frames, bool files, bool lines, bool inlines) {
  symbolize::Result r;
  r.mapping = 0;
  for (int i = 0; i < frames; ++i) {
    pprof::Frame f;
    f.name = "f" + std::to_string(i);
    if (files) f.file = "/src/a.c";
    if (lines) f.line = 10 + i;
    r.frames.push_back(f);
  }
  r.inlines_known = inlines;
  return r;
}

pprof::Mapping flags(const std::vector<symbolize::Result>& rs) {
  symbolize::Coverage c;
  for (const auto& r : rs) c.add(r);
  pprof::Mapping m;
  m.has_functions = m.has_filenames = m.has_line_numbers = m.has_inline_frames = true;
  c.apply(&m);
  return m;
}

}  // namespace

TEST(all_complete_sets_all_flags) {
  auto m = flags({located(1, true, true, true), located(2, true, true, true)});
  CHECK(m.has_functions && m.has_filenames && m.has_line_numbers && m.has_inline_frames);
}

TEST(one_unnamed_location_clears_every_flag) {
  auto m = flags({located(1, true, true, true), located(0, false, false, false)});
  CHECK(!m.has_functions && !m.has_filenames && !m.has_line_numbers && !m.has_inline_frames);
}

TEST(named_without_debug_info_has_functions_only) {
  auto m = flags({located(1, true, true, true), located(1, false, false, false)});
  CHECK(m.has_functions);
  CHECK(!m.has_filenames && !m.has_line_numbers && !m.has_inline_frames);
}

TEST(a_frame_without_a_line_clears_line_numbers) {
  symbolize::Result r = located(2, true, true, true);
  r.frames[1].line = 0;
  auto m = flags({located(1, true, true, true), r});
  CHECK(m.has_functions && m.has_filenames && m.has_inline_frames);
  CHECK(!m.has_line_numbers);
}

TEST(no_locations_claims_nothing) {
  auto m = flags({});
  CHECK(!m.has_functions && !m.has_filenames && !m.has_line_numbers && !m.has_inline_frames);
}

// In this test binary the symbolizer is linked into the executable, which is
// never the shim's; libdw (loaded by load_libdw) and what only it needs are.
TEST(libraries_loaded_only_for_libdw_are_told_apart) {
  std::string err;
  CHECK(symbolize::load_libdw(&err));
  std::ifstream f("/proc/self/maps");
  std::stringstream maps;
  maps << f.rdbuf();
  symbolize::Session s(maps.str());
  const auto own = s.loaded_for_shim();
  const auto& m = s.mappings();
  CHECK_EQ(own.size(), m.size());
  bool saw_libdw = false, saw_libc = false;
  for (size_t i = 0; i < m.size() && i < own.size(); ++i) {
    const std::string base = m[i].file.substr(m[i].file.rfind('/') + 1);
    if (base.rfind("libdw", 0) == 0 || base.rfind("libelf", 0) == 0) {
      saw_libdw = true;
      CHECK(own[i]);
    }
    // libc.so.6, or libc-2.31.so before glibc 2.34 (Debian 11).
    const bool libc = base.rfind("libc.so", 0) == 0 || base.rfind("libc-2.", 0) == 0;
    if (libc || i == 0) {
      saw_libc = saw_libc || libc;
      CHECK(!own[i]);  // the executable and libc
    }
    if (check::failures()) std::fprintf(stderr, "  %s: %s\n", m[i].file.c_str(), own[i] ? "shim's" : "program's");
  }
  CHECK(saw_libdw && saw_libc);
}
