// symbolize_coverage: what a mapping's has_* flags say, from the results of
// the addresses looked up in it (symbolize.h, Coverage, says why a flag is
// set only when every location has it).
#include "symbolize.h"

namespace symbolize {

void Coverage::add(const Result& r) {
  ++locations;
  go_tables += r.go_tables;
  if (r.frames.empty()) return;
  ++functions;
  bool files = true, lines = true;
  for (const auto& f : r.frames) {
    files = files && !f.file.empty();
    lines = lines && f.line > 0;
  }
  filenames += files;
  line_numbers += lines;
  inline_frames += r.inlines_known;
}

void Coverage::apply(pprof::Mapping* m) const {
  m->has_functions = locations && (functions == locations || go_tables);
  m->has_filenames = locations && filenames == locations;
  m->has_line_numbers = locations && line_numbers == locations;
  m->has_inline_frames = locations && inline_frames == locations;
}

}  // namespace symbolize
