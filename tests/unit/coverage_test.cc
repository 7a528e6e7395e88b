// coverage_test: a mapping's has_* flags are set only when every location
// looked up in it has that kind of information (pprof trusts the flags and
// will not symbolize a flagged mapping itself).
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
