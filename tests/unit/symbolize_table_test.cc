// symbolize_table_test: a module's symbol table kept in the symbol cache
// (symbolize_table.cc). Addresses in modules without DWARF (libstdc++ and
// libgcc_s here: no debug package) named from a kept table get exactly the
// frames libdw gives, and so do libc's (DWARF from libc6-dbg, symbols from
// the table); the table is what names them (a name edited in it shows); a
// table that is damaged, cut short, stale (a witness changed) or another
// module's is never used, and is written again.
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../fixtures/runtime_so.h"
#include "check.h"
#include "same_results.h"
#include "test_files.h"
#include "symbolize.h"
#include "symbolize_internal.h"

namespace {

using symbolize::Result;
using symbolize::Session;
using symbolize::internal::ModInfo;

std::vector<std::string> list(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0 && n[0] != '.')
        out.push_back(n);
    }
    closedir(d);
  }
  return out;
}

uint64_t fn(const char* name) { return reinterpret_cast<uint64_t>(dlsym(RTLD_DEFAULT, name)); }

// Inside functions of libstdc++ and libgcc_s (no DWARF) and of libc.
std::vector<uint64_t> probes() {
  return {fn("_ZSt9terminatev") + 4, fn("_ZNSt6chrono3_V212system_clock3nowEv") + 2,
          fn("_Unwind_Backtrace") + 3, fn("qsort") + 1, fn("getpid") + 1};
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += char(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

}  // namespace

TEST(kept_tables_give_the_frames_libdw_gives_and_bad_ones_are_never_used) {
  const std::string text = slurp("/proc/self/maps");
  const std::string dir = runtime_so::make_temp_dir(), cache = dir + "/.profshim-symbols";
  const std::vector<uint64_t> addrs = probes();
  for (uint64_t a : addrs) CHECK(a > 16);
  const Run fresh = run(addrs, "", text);
  for (size_t i = 0; i < 4; ++i) CHECK(!fresh.results[i].frames.empty());  // something to compare
  CHECK(!fresh.results[3].frames.empty() && fresh.results[3].frames[0].line > 0);  // libc: DWARF lines
  run(addrs, dir, text);
  auto forget_entries = [&] {
    for (const std::string& n : list(cache, ".sym")) unlink((cache + "/" + n).c_str());
  };
  // Named again with the entries gone: from the tables, the same frames.
  forget_entries();
  const Run reread = run(addrs, dir, text);
  CHECK(same(fresh.results, reread.results));
  CHECK_EQ(reread.stats.looked_up, uint64_t(addrs.size()));
  CHECK_EQ(reread.stats.from_table, uint64_t(3));  // libstdc++'s and libgcc_s's: libdw not needed

  // libstdc++'s table, with std::terminate renamed in it: the name shows,
  // so the table is what named it.
  const std::string want = fresh.results[0].frames.empty() ? "" : fresh.results[0].frames[0].system_name;
  std::string path, original;
  ModInfo edited;
  for (const std::string& n : list(cache, ".tab")) {
    ModInfo t;
    t.build_id = unhex(n.substr(0, n.size() - 4));
    const std::string bytes = slurp(cache + "/" + n);
    CHECK(symbolize::internal::decode_table(bytes, 0, &t));
    CHECK(symbolize::internal::encode_table(t, 0) == bytes);  // round trip
    for (auto& s : t.syms)
      if (!want.empty() && want == s.name) {
        s.name = "profshim_renamed_in_table";
        path = cache + "/" + n, original = bytes;
        edited = std::move(t);
        break;
      }
  }
  CHECK(!path.empty());
  if (path.empty()) {
    runtime_so::remove_dir(dir);
    return;
  }
  const std::string bait = symbolize::internal::encode_table(edited, 0);
  spill(path, bait);
  forget_entries();
  const Run renamed = run(addrs, dir, text);
  CHECK(renamed.results[0].frames.size() == 1 &&
        renamed.results[0].frames[0].system_name == "profshim_renamed_in_table");
  CHECK(same({renamed.results.begin() + 1, renamed.results.end()}, {fresh.results.begin() + 1, fresh.results.end()}));

  // Any one byte changed (a sample of them; every one fails the checksum or
  // a bound), or cut short: refused.
  int accepted = 0;
  for (size_t i = 0; i < bait.size(); i += (i < 256 || i + 64 > bait.size()) ? 1 : 97) {
    std::string bad = bait;
    bad[i] = char(bad[i] ^ 0x04);
    ModInfo x;
    x.build_id = edited.build_id;
    accepted += symbolize::internal::decode_table(bad, 0, &x);
  }
  CHECK_EQ(accepted, 0);
  // Damaged, cut short, stale, another module's: never used (the frames
  // are libdw's), and written again.
  std::vector<std::string> baits = {bait, bait.substr(0, bait.size() / 2)};
  baits[0][bait.size() / 3] ^= 1;
  ModInfo stale = edited;
  stale.syms_from_table = false;
  CHECK(!stale.witnesses.empty());
  if (!stale.witnesses.empty()) stale.witnesses[0].mtime_ns += 1;
  baits.push_back(symbolize::internal::encode_table(stale, 0));
  ModInfo other = edited;
  other.build_id[0] ^= 1;
  baits.push_back(symbolize::internal::encode_table(other, 0));
  for (size_t k = 0; k < baits.size(); ++k) {
    spill(path, baits[k]);
    forget_entries();
    const Run r = run(addrs, dir, text);
    CHECK(same(fresh.results, r.results));
    CHECK(slurp(path) == original);
    if (!same(fresh.results, r.results)) std::fprintf(stderr, "  bait %zu was used\n", k);
  }
  runtime_so::remove_dir(dir);
}
