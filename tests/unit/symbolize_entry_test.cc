// symbolize_entry_test: an entry of the symbol cache read lazily and grown
// by appending (symbolize_entry.cc): each address's result unpacks to what
// was written; an entry grown over three writes holds the union (an address
// it had keeps its result), each string once; every byte of a grown entry
// is still covered by the checks.
#include <set>
#include <string>

#include "check.h"
#include "symbolize_cache.h"

namespace {

using symbolize::Result;
using namespace symbolize::cache;

Result make(const char* name, const char* file, int line, int frames) {
  Result r;
  r.inlines_known = frames > 1;
  for (int i = 0; i < frames; ++i) {
    pprof::Frame f;
    f.name = std::string(name) + (i ? "_caller" : ""), f.system_name = "_Z" + f.name, f.file = file;
    f.line = line + i, f.start_line = line - 1;
    r.frames.push_back(f);
  }
  return r;
}

bool equal(const Result& a, const Result& b) {
  if (a.inlines_known != b.inlines_known || a.frames.size() != b.frames.size()) return false;
  for (size_t k = 0; k < a.frames.size(); ++k) {
    const pprof::Frame &x = a.frames[k], &y = b.frames[k];
    if (x.name != y.name || x.system_name != y.system_name || x.file != y.file || x.line != y.line ||
        x.start_line != y.start_line)
      return false;
  }
  return true;
}

}  // namespace

TEST(entry_grows_by_appending_and_reads_lazily) {
  Entry e;
  e.build_id = "\x12\x34\x56";
  e.witnesses.push_back(observe("/proc/self/exe"));
  e.results[0x100] = make("f", "/src/a.c", 10, 2);
  e.results[0x200] = make("g", "/src/a.c", 20, 1);
  e.results[0x300] = Result();  // no frames: kept too
  Parsed p;
  CHECK(parse(encode(e), &p));
  for (const auto& r : e.results) {
    Result got;
    CHECK(p.result(r.first, &got) && equal(got, r.second));
  }
  Result none;
  CHECK(!p.result(0x150, &none));
  // Grown twice: a new address whose strings the entry has, one with new
  // strings, and one it has already (its old result stands).
  std::unordered_map<uint64_t, Result> fresh = {{0x400, make("g", "/src/a.c", 21, 1)},
                                                {0x500, make("h", "/src/b.c", 5, 3)},
                                                {0x200, make("WRONG", "/src/wrong.c", 1, 1)}};
  Parsed p2;
  CHECK(parse(merge(e.build_id, e.witnesses, &p, fresh), &p2));
  std::unordered_map<uint64_t, Result> more = {{0x50, make("k", "/src/b.c", 7, 1)}};
  const std::string grown = merge(e.build_id, e.witnesses, &p2, more);
  Entry back;
  CHECK(decode(grown, &back));
  CHECK(back.build_id == e.build_id && back.witnesses.size() == 1 && back.witnesses[0] == e.witnesses[0]);
  CHECK_EQ(back.results.size(), size_t(6));
  std::unordered_map<uint64_t, Result> want = e.results;
  want[0x400] = fresh[0x400], want[0x500] = fresh[0x500], want[0x50] = more[0x50];
  for (const auto& w : want) CHECK(back.results.count(w.first) && equal(back.results[w.first], w.second));
  Parsed p3;
  CHECK(parse(grown, &p3));
  std::set<std::string> distinct;
  for (const auto& s : p3.strings) distinct.insert(grown.substr(s.first, s.second));
  CHECK_EQ(distinct.size(), p3.strings.size());  // each string once
  // Any one byte of the grown entry changed: refused.
  int accepted = 0;
  for (size_t i = 0; i < grown.size(); ++i) {
    std::string bad = grown;
    bad[i] = char(bad[i] ^ 0x40);
    Parsed x;
    accepted += parse(bad, &x);
  }
  CHECK_EQ(accepted, 0);
  // A result whose string number is past the strings: refused, checksum
  // and all right.
  std::string forged = grown.substr(0, grown.size() - 8);
  const size_t file_at = forged.size() - 16 - 4;  // the last result (0x50's) ends with its one frame
  forged[file_at + 3] = char(0x7f);  // its file: string number 0x7f000000 and more
  const uint64_t sum = checksum(forged.data(), forged.size());
  forged.append(reinterpret_cast<const char*>(&sum), 8);
  Parsed x;
  CHECK(!parse(forged, &x));
}
