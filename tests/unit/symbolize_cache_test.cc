// symbolize_cache_test: the symbol cache of a session's images
// (symbolize_cache.h). A reused symbolization gives exactly the frames a
// fresh one gives (names, file:line, inlined frames, in this binary, libc
// with its debug file, a library built at run time); an entry that is
// corrupt, truncated, filed under another build ID, or stale (a debug file
// installed since it was written) is never used; images writing one entry
// at once leave one whole, valid entry and no temporary.
#include "symbolize_cache.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <stdio.h>
#include <time.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../fixtures/runtime_so.h"
#include "check.h"
#include "same_results.h"
#include "test_files.h"
#include "symbolize.h"

// --- code with names, lines and an inlined call ----------------------------------

extern "C" __attribute__((noinline)) uint64_t symcache_here() {
  asm volatile("" ::: "memory");
  return reinterpret_cast<uint64_t>(__builtin_return_address(0)) - 1;
}

static inline __attribute__((always_inline)) uint64_t symcache_inlined(int* n) {
  *n += 1;
  return symcache_here();
}

__attribute__((noinline)) uint64_t symcache_caller(int* n) {
  uint64_t pc = symcache_inlined(n);
  asm volatile("" ::: "memory");
  return pc;
}

namespace {

using symbolize::Result;
using symbolize::Session;
using symbolize::cache::Entry;

std::string maps() { return slurp("/proc/self/maps"); }

// The files a directory holds (names, hidden ones too) that end in suffix.
std::vector<std::string> list(const std::string& dir, const std::string& suffix = "") {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != ".." && n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(),
                                                                        suffix) == 0)
        out.push_back(n);
    }
    closedir(d);
  }
  return out;
}

uint64_t libc_function(const char* name) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  return libc ? reinterpret_cast<uint64_t>(dlsym(libc, name)) : 0;
}

// Addresses whose frames differ in every way a cache could get wrong.
std::vector<uint64_t> probes() {
  int n = 0;
  return {symcache_caller(&n),                    // two frames: inlined and its caller
          symcache_here(),                        // a function of this test
          libc_function("qsort") + 1,             // libc, file:line from libc6-dbg
          libc_function("getpid") + 1,
          reinterpret_cast<uint64_t>(&slurp) + 3, // C++, demangled
          0x10};                                  // no mapping
}

void print(const std::vector<Result>& rs) {
  for (const auto& r : rs) {
    std::fprintf(stderr, "  mapping %d, inlines %d:\n", r.mapping, int(r.inlines_known));
    for (const auto& f : r.frames)
      std::fprintf(stderr, "    %s [%s] %s:%lld\n", f.name.c_str(), f.system_name.c_str(), f.file.c_str(),
                   static_cast<long long>(f.line));
  }
}

std::string cache_dir(const std::string& profile_dir) { return profile_dir + "/.profshim-symbols"; }

}  // namespace

// --- the format -----------------------------------------------------------------------

TEST(entry_round_trips_and_every_damage_is_caught) {
  Entry e;
  e.build_id = std::string("\x01\x02\xff\x00\x7f", 5);
  e.witnesses.push_back(symbolize::cache::observe("/proc/self/exe"));
  e.witnesses.push_back(symbolize::cache::observe("/nonexistent/debug"));
  Result r;
  r.inlines_known = true;
  pprof::Frame f;
  f.name = "ns::f(int) const", f.system_name = "_ZNK2ns1fEi", f.file = "/src/a b.cc", f.line = 7, f.start_line = 3;
  r.frames = {f, f};
  r.frames[1].name = "outer";
  e.results[0x1234] = r;
  e.results[0x99] = Result();  // an address with no frames is kept too
  const std::string bytes = symbolize::cache::encode(e);
  Entry back;
  CHECK(symbolize::cache::decode(bytes, &back));
  CHECK(back.build_id == e.build_id && back.witnesses.size() == 2 && back.results.size() == 2);
  CHECK(back.witnesses[0] == e.witnesses[0] && back.witnesses[1] == e.witnesses[1]);
  CHECK(same({back.results[0x1234], back.results[0x99]}, {r, Result()}));
  // Any one byte changed, anywhere: refused (the checksum, or the magic).
  int accepted = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = char(bad[i] ^ 0x20);
    Entry x;
    accepted += symbolize::cache::decode(bad, &x);
  }
  CHECK_EQ(accepted, 0);
  // Cut short, or with bytes after it.
  for (size_t n : {size_t(0), size_t(7), size_t(16), bytes.size() / 2, bytes.size() - 1}) {
    Entry x;
    CHECK(!symbolize::cache::decode(bytes.substr(0, n), &x));
  }
  Entry x;
  CHECK(!symbolize::cache::decode(bytes + "x", &x));
}

// --- reuse ------------------------------------------------------------------------------

// The first image looks every address up and writes the entries; the next
// one reads them all, and both give exactly what a session without the
// cache gives.
TEST(reused_frames_equal_fresh_ones) {
  const std::string text = maps();
  const std::string dir = runtime_so::make_temp_dir();
  const std::vector<uint64_t> addrs = probes();
  const Run fresh = run(addrs, "", text);
  const Run first = run(addrs, dir, text);
  const Run second = run(addrs, dir, text);
  CHECK(same(fresh.results, first.results));
  CHECK(same(fresh.results, second.results));
  CHECK(first.stats.cached == 0 && first.stats.looked_up == 5 && first.stats.stored >= 2);
  CHECK(second.stats.cached == 5 && second.stats.looked_up == 0 && second.stats.stored == 0);
  CHECK(first.error.empty() && second.error.empty());
  // What was checked is what a profile carries: libc's frame has a file and
  // a line (libc6-dbg), the inlined call two frames.
  CHECK(fresh.results[0].frames.size() == 2 && fresh.results[0].inlines_known);
  CHECK(!fresh.results[2].frames.empty() && fresh.results[2].frames[0].line > 0);
  CHECK(fresh.results[5].mapping < 0);
  if (!same(fresh.results, second.results)) {
    print(fresh.results);
    print(second.results);
  }
  // A later image with one address more looks up only that one, and keeps
  // what the entry had.
  std::vector<uint64_t> more = addrs;
  more.push_back(libc_function("strtol") + 2);
  const Run third = run(more, dir, text);
  CHECK(third.stats.cached == 5 && third.stats.looked_up == 1);
  const Run fourth = run(more, dir, text);
  CHECK(fourth.stats.cached == 6 && fourth.stats.looked_up == 0);
  CHECK(same(run(more, "", text).results, fourth.results));
  runtime_so::remove_dir(dir);
}

// A corrupt entry (one byte flipped), a truncated one, and one filed under
// another module's build ID are not used: the addresses are looked up
// afresh, the frames are right, and the entries are written whole again.
TEST(corrupt_or_misfiled_entry_is_never_used) {
  const std::string text = maps();
  const std::string dir = runtime_so::make_temp_dir();
  const std::vector<uint64_t> addrs = probes();
  const Run fresh = run(addrs, "", text);
  run(addrs, dir, text);
  std::vector<std::string> names = list(cache_dir(dir), ".sym");
  CHECK(names.size() >= 2);
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string path = cache_dir(dir) + "/" + names[i];
    std::string bytes = slurp(path);
    if (i % 2 == 0) {
      bytes[bytes.size() / 2] = char(bytes[bytes.size() / 2] ^ 1);
    } else {
      bytes.resize(bytes.size() - 9);
    }
    spill(path, bytes);
  }
  const Run damaged = run(addrs, dir, text);
  CHECK(same(fresh.results, damaged.results));
  CHECK(damaged.stats.cached == 0 && damaged.stats.rejected == names.size());
  const Run repaired = run(addrs, dir, text);
  CHECK(repaired.stats.cached == 5 && repaired.stats.rejected == 0);
  CHECK(same(fresh.results, repaired.results));
  // Another module's whole, valid entry, under this one's name.
  names = list(cache_dir(dir), ".sym");
  CHECK(names.size() >= 2);
  if (names.size() >= 2) {
    spill(cache_dir(dir) + "/" + names[0], slurp(cache_dir(dir) + "/" + names[1]));
    const Run misfiled = run(addrs, dir, text);
    CHECK(same(fresh.results, misfiled.results));
    CHECK_EQ(misfiled.stats.rejected, uint64_t(1));
  }
  runtime_so::remove_dir(dir);
}

// An entry written before a module's debug file was installed says that the
// debug file was not there; once it is, the entry is stale and not used
// (else the profile would lack the lines a fresh lookup finds).
TEST(stale_entry_is_never_used) {
  const std::string lib = runtime_so::make_temp_dir(), dir = runtime_so::make_temp_dir();
  const std::string so = runtime_so::build(lib, "symstale", false);
  const std::string debug = lib + "/.debug/keep.debug";  // where the debuglink points
  const std::string objcopy = runtime_so::tool("objcopy");
  const std::string cmd = "mkdir -p " + lib + "/.debug && " + objcopy + " --only-keep-debug " + so + " " + lib +
                          "/keep.debug && " + runtime_so::tool("strip") + " --strip-all " + so + " && " + objcopy +
                          " --add-gnu-debuglink=" + lib + "/keep.debug " + so + " && rm " + lib + "/keep.debug";
  CHECK(!so.empty() && std::system(cmd.c_str()) == 0);
  runtime_so::Loaded fx = runtime_so::load(so, "symstale");
  CHECK(fx.exported != 0);
  if (!fx.exported) return;
  const std::vector<uint64_t> addrs = {fx.exported + 1};
  const std::string text = maps();
  const Run before = run(addrs, dir, text);  // no debug file: the name, no line
  CHECK(before.results[0].frames.size() == 1 && before.results[0].frames[0].line == 0);
  CHECK(run(addrs, dir, text).stats.cached == 1);
  // The debug package arrives: its file where the debuglink points.
  // The same command, so the same build ID: this module's debug file.
  const std::string build = runtime_so::tool("cc") + " -shared -fPIC -g -O1 -fno-toplevel-reorder -DPFX=symstale -o " +
                            lib + "/full.so " + lib + "/symstale.c && " + objcopy + " --only-keep-debug " + lib +
                            "/full.so " + debug;
  CHECK(std::system(build.c_str()) == 0);
  const Run fresh = run(addrs, "", text);
  CHECK(fresh.results[0].frames.size() == 1 && fresh.results[0].frames[0].line > 0);
  const Run after = run(addrs, dir, text);
  CHECK(after.stats.cached == 0 && after.stats.rejected == 1);
  CHECK(same(fresh.results, after.results));
  CHECK(run(addrs, dir, text).stats.cached == 1);  // written again, with the new witness
  runtime_so::remove_dir(lib);
  runtime_so::remove_dir(dir);
}

// Images that write one entry at the same moment: each writes a whole file
// and renames it into place; what is left is one valid entry, no temporary,
// and every image's frames were right.
TEST(concurrent_writers_leave_one_valid_entry) {
  const std::string dir = runtime_so::make_temp_dir();
  const std::vector<uint64_t> addrs = probes();
  const std::string text = maps();
  const Run fresh = run(addrs, "", text);
  constexpr int kWriters = 8;
  std::vector<pid_t> kids;
  for (int k = 0; k < kWriters; ++k) {
    pid_t pid = fork();
    if (pid == 0) {
      int bad = 0;
      for (int round = 0; round < 20; ++round) {
        // Each writer also adds addresses of its own, so the entries differ.
        std::vector<uint64_t> mine = addrs;
        mine.push_back(libc_function("strtol") + 1 + k * 3 + round % 3);
        Run r = run(mine, dir, text);
        mine.pop_back();
        r.results.pop_back();
        // A reader never meets a half-written entry: none is ever rejected.
        bad += !same(fresh.results, r.results) || !r.error.empty() || r.stats.rejected != 0;
      }
      _exit(bad ? 1 : 0);
    }
    kids.push_back(pid);
  }
  int failed = 0;
  for (pid_t p : kids) {
    int st = 0;
    waitpid(p, &st, 0);
    failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  CHECK_EQ(failed, 0);
  for (const std::string& n : list(cache_dir(dir))) CHECK(n[0] != '.');  // no temporary left
  for (const std::string& n : list(cache_dir(dir), ".sym")) {
    Entry e;
    CHECK(symbolize::cache::decode(slurp(cache_dir(dir) + "/" + n), &e));
  }
  const Run after = run(addrs, dir, text);
  CHECK(after.stats.cached == 5 && same(fresh.results, after.results));
  runtime_so::remove_dir(dir);
}

// The cache directory is used only if it is this user's and no one else's
// to write: a link or another kind of file there is said, not followed.
TEST(cache_directory_that_is_not_ours_is_refused) {
  const std::string text = maps();
  const std::string dir = runtime_so::make_temp_dir(), elsewhere = runtime_so::make_temp_dir();
  CHECK(symlink(elsewhere.c_str(), cache_dir(dir).c_str()) == 0);
  const Run r = run(probes(), dir, text);
  CHECK(r.error.find("not a directory") != std::string::npos);
  CHECK(list(elsewhere).empty());
  unlink(cache_dir(dir).c_str());
  CHECK(mkdir(cache_dir(dir).c_str(), 0777) == 0 && chmod(cache_dir(dir).c_str(), 0777) == 0);
  const Run w = run(probes(), dir, text);
  CHECK(w.error.find("may write") != std::string::npos && list(cache_dir(dir)).empty());
  runtime_so::remove_dir(dir);
  runtime_so::remove_dir(elsewhere);
}

// --- the inflated copy of a compressed debug file ----------------------------------------

namespace {

ino_t inode(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

// libc6-dbg's DWARF is compressed: the first lookup leaves an inflated copy
// in the cache, the next image's lookups (its entries gone) read the copy
// and find exactly the frames the original gives; a copy cut short, or
// another module's copy under its name, is not read but made again.
TEST(inflated_debug_copy_gives_the_same_frames) {
  const std::string text = maps();
  const std::string dir = runtime_so::make_temp_dir();
  const std::vector<uint64_t> addrs = probes();
  const Run fresh = run(addrs, "", text);
  run(addrs, dir, text);
  const std::vector<std::string> copies = list(cache_dir(dir), ".debug");
  CHECK_EQ(copies.size(), size_t(1));  // libc's: the only compressed debug file here
  if (copies.size() != 1) return;
  const std::string copy = cache_dir(dir) + "/" + copies[0];
  auto forget_entries = [&] {
    for (const std::string& n : list(cache_dir(dir), ".sym")) unlink((cache_dir(dir) + "/" + n).c_str());
  };
  const ino_t made = inode(copy);
  forget_entries();
  const Run reread = run(addrs, dir, text);
  CHECK(same(fresh.results, reread.results) && reread.stats.looked_up == 5);
  CHECK_EQ(inode(copy), made);  // read, not made again
  // And read by libdw, not the original inflated again in memory: a file
  // name changed in the copy (same length, same build ID) is in the frames.
  const std::string& want = fresh.results[2].frames.empty() ? std::string() : fresh.results[2].frames[0].file;
  const std::string base = want.substr(want.rfind('/') + 1);
  CHECK(base.size() > 2);  // qsort's file, from libc6-dbg
  if (base.size() > 2) {
    const std::string whole = slurp(copy);
    std::string marked = whole;
    const std::string from = base + std::string(1, '\0'), to = "Q" + from.substr(1);
    size_t n = 0;
    for (size_t at = marked.find(from); at != std::string::npos; at = marked.find(from, at + 1), ++n)
      marked.replace(at, from.size(), to);
    CHECK(n > 0);
    spill(copy, marked);
    forget_entries();
    const Run edited = run(addrs, dir, text);
    CHECK(!edited.results[2].frames.empty() &&
          edited.results[2].frames[0].file == want.substr(0, want.size() - base.size()) + "Q" + base.substr(1));
    spill(copy, whole);
    CHECK_EQ(inode(copy), made);
  }
  // Cut short: not read, made again whole.
  CHECK(truncate(copy.c_str(), 1 << 20) == 0);
  forget_entries();
  const Run cut = run(addrs, dir, text);
  CHECK(same(fresh.results, cut.results));
  CHECK(inode(copy) != made);
  struct stat st;
  CHECK(stat(copy.c_str(), &st) == 0 && st.st_size > (2 << 20));
  // Another module's ELF under libc's name: its build ID is not libc's.
  const std::string whole = slurp(copy);
  const std::string other = "cp /proc/self/exe " + copy + ".x && mv " + copy + ".x " + copy;
  CHECK(std::system(other.c_str()) == 0);
  forget_entries();
  const Run wrong = run(addrs, dir, text);
  CHECK(same(fresh.results, wrong.results));
  CHECK(slurp(copy) == whole);  // made again (inodes are reused: the bytes tell)
  for (const std::string& n : list(cache_dir(dir))) CHECK(n[0] != '.');  // no temporary left
  runtime_so::remove_dir(dir);
}

// A copy interrupted for good (a stop that gave up, a SIGKILL) leaves its
// temporary: 10 MiB each in a shared PROFILE_DIR. The next image that makes
// a copy removes those of processes that are gone, not a live one's.
TEST(dead_copies_temporaries_are_swept) {
  const std::string text = maps();
  const std::string dir = runtime_so::make_temp_dir();
  const std::vector<uint64_t> addrs = probes();
  run(addrs, dir, text);  // makes the cache directory (and a copy)
  for (const std::string& n : list(cache_dir(dir), ".debug")) unlink((cache_dir(dir) + "/" + n).c_str());
  for (const std::string& n : list(cache_dir(dir), ".sym")) unlink((cache_dir(dir) + "/" + n).c_str());
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // a pid that is gone
  const std::string dead = cache_dir(dir) + "/.abc.debug.tmp." + std::to_string(child) + ".0123456789abcdef";
  const std::string live = cache_dir(dir) + "/.abd.debug.tmp.1.0123456789abcdef";  // init's: there
  for (const std::string& p : {dead, live}) {
    FILE* f = fopen(p.c_str(), "w");
    CHECK(f != nullptr);
    if (f) fclose(f);
    struct timespec old[2] = {{time(nullptr) - 60, 0}, {time(nullptr) - 60, 0}};
    utimensat(AT_FDCWD, p.c_str(), old, 0);
  }
  run(addrs, dir, text);  // makes the copy again
  CHECK(access(dead.c_str(), F_OK) != 0);
  CHECK(access(live.c_str(), F_OK) == 0);
  runtime_so::remove_dir(dir);
}
