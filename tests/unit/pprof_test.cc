// pprof_test: Builder encodes profile.proto exactly, check_valid() rejects each
// broken invariant, and go tool pprof (the reference reader) reads what we
// write. The go tests fail, not skip, when go is missing.
#include "pprof.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "check.h"
#include "gzip.h"

using pprof::Builder;
using pprof::Frame;
using pprof::Label;
using pprof::Mapping;

namespace {

const char kBuildId[] = "0123456789abcdef0123456789abcdef01234567";

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/pprof_test.XXXXXX";
    if (mkdtemp(tmpl)) path = tmpl;
  }
  ~TempDir() {
    if (!path.empty()) std::system(("rm -rf '" + path + "'").c_str());
  }
};

bool write_profile(const Builder& b, const std::string& file) {
  std::string err = b.check_valid();
  if (!err.empty()) std::fprintf(stderr, "  check_valid: %s\n", err.c_str());
  std::string gz;
  if (!err.empty() || !gzip::load(&err) || !gzip::compress(b.encode(), &gz, &err)) return false;
  FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(gz.data(), 1, gz.size(), f) == gz.size();
  return std::fclose(f) == 0 && ok;
}

std::string read_file(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

// Runs `go tool pprof ARGS FILE` in its own HOME/GOCACHE; returns stdout and
// records a failure when go exits non-zero (including "go: not found") or
// says anything on stderr.
std::string go_pprof(const TempDir& dir, const std::string& args, const std::string& file) {
  std::string cmd = "cd '" + dir.path + "' && HOME='" + dir.path + "' GOCACHE='" + dir.path +
                    "/gocache' PPROF_TMPDIR='" + dir.path + "' go tool pprof " + args + " '" +
                    file + "' 2>'" + dir.path + "/stderr'";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (!p) { CHECK(p != nullptr); return out; }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  std::string err = read_file(dir.path + "/stderr");
  bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok || !err.empty())
    std::fprintf(stderr, "  `%s`: status %d\n  stdout:\n%s\n  stderr:\n%s\n", cmd.c_str(),
                 status, out.c_str(), err.c_str());
  CHECK(ok);
  // Mappings that say has_functions etc. must need no binary: pprof then
  // neither tries to symbolize nor warns (the profile works on any machine).
  CHECK(err.empty());
  return out;
}

bool has(const std::string& text, const std::string& needle) {
  if (text.find(needle) != std::string::npos) return true;
  std::fprintf(stderr, "  missing \"%s\" in:\n%s\n", needle.c_str(), text.c_str());
  return false;
}

// The -top line for a function (pprof may shorten names; match on a part).
std::string top_line(const std::string& top, const std::string& name_part) {
  size_t at = top.find(name_part);
  if (at == std::string::npos) return "";
  size_t begin = top.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return top.substr(begin, top.find('\n', at) - begin);
}

// `flat` must be the first column of name_part's -top line.
bool flat_is(const std::string& top, const std::string& name_part, const std::string& flat) {
  std::string line = top_line(top, name_part);
  size_t first = line.find_first_not_of(' ');
  if (first != std::string::npos && line.compare(first, flat.size() + 1, flat + " ") == 0)
    return true;
  std::fprintf(stderr, "  want flat %s for %s in:\n%s\n", flat.c_str(), name_part.c_str(),
               top.c_str());
  return false;
}

Mapping mapping(uint64_t start, uint64_t limit, const std::string& file, const char* build_id) {
  Mapping m;
  m.start = start; m.limit = limit; m.file = file; m.build_id = build_id;
  m.has_functions = m.has_filenames = m.has_line_numbers = m.has_inline_frames = true;
  return m;
}

Frame frame(const std::string& name, const std::string& file, int64_t line) {
  Frame f;
  f.name = name; f.file = file; f.line = line; f.start_line = line > 3 ? line - 3 : 0;
  return f;
}

Label str_label(const std::string& k, const std::string& v) {
  Label l; l.key = k; l.str = v; return l;
}
Label num_label(const std::string& k, int64_t v) {
  Label l; l.key = k; l.num = v; l.is_num = true; return l;
}

const char kPushBack[] = "std::vector<int, std::allocator<int> >::push_back(int const&)";
const char kCompute[] = "Widget::compute(int) const";
const char kSpin[] = "(anonymous namespace)::spin(unsigned long)";

// samples/count + cpu/nanoseconds; one location holds an inlined push_back.
void build_cpu(Builder* b) {
  uint64_t exe = b->add_mapping(mapping(0x400000, 0x500000, "/opt/app/bin/server", kBuildId));
  Mapping lib = mapping(0x7f0000000000, 0x7f0000100000, "/opt/app/lib/libwidget.so", "");
  lib.offset = 0x1000;
  uint64_t so = b->add_mapping(lib);
  Frame push = frame(kPushBack, "/usr/include/c++/12/bits/stl_vector.h", 1198);
  push.system_name = "_ZNSt6vectorIiSaIiEE9push_backERKi";
  uint64_t inl = b->add_location(0x401234, exe, {push, frame(kCompute, "/src/widget.cc", 42)});
  uint64_t main_loc = b->add_location(0x402000, exe, {frame("main", "/src/main.cc", 10)});
  uint64_t spin = b->add_location(0x7f0000001234, so, {frame(kSpin, "/src/spin.cc", 7)});
  uint64_t bare = b->add_location(0x7f0000002000, so, {});
  b->add_sample({inl, main_loc}, {3, 30000000},
                {str_label("thread_name", "worker 1"), num_label("thread_id", 4242)});
  b->add_sample({spin, main_loc}, {5, 50000000},
                {str_label("thread_name", "main"), num_label("thread_id", 4241)});
  b->add_sample({bare, main_loc}, {1, 10000000});
  b->set_default_sample_type("cpu");
  b->set_time(1700000000000000000, 2000000000);
  b->add_comment("profshim test");
}

Builder* new_cpu_builder() {
  return new Builder({{"samples", "count"}, {"cpu", "nanoseconds"}}, {"cpu", "nanoseconds"},
                     10000000);
}

// The CPU profile of build_cpu(), written gzip'ed into dir; "" if it fails.
std::string write_cpu_profile(const TempDir& dir) {
  Builder* b = new_cpu_builder();
  build_cpu(b);
  std::string file = dir.path + "/cpu.pprof";
  bool ok = write_profile(*b, file);
  delete b;
  CHECK(ok);
  return file;
}

}  // namespace

TEST(encode_exact_bytes_minimal) {
  Builder b({{"samples", "count"}}, {"cpu", "nanoseconds"}, 10);
  std::string want = std::string("\x0a\x04\x08\x01\x10\x02", 6) +  // sample_type = 1
                     std::string("\x32\x00", 2) + "\x32\x07samples" + "\x32\x05" "count" +
                     "\x32\x03" "cpu" + "\x32\x0bnanoseconds" +  // string_table = 6
                     "\x5a\x04\x08\x03\x10\x04" +                 // period_type = 11
                     "\x60\x0a";                                  // period = 12
  CHECK(b.encode() == want);
}

TEST(interning_reuses_ids) {
  Builder b({{"samples", "count"}}, {"cpu", "nanoseconds"}, 1);
  uint64_t m = b.add_mapping(mapping(0x1000, 0x2000, "/bin/x", ""));
  uint64_t a = b.add_location(0x1100, m, {frame("f", "f.cc", 1)});
  std::string before = b.encode();
  CHECK_EQ(b.add_location(0x1100, m, {frame("f", "f.cc", 1)}), a);
  CHECK(b.encode() == before);  // no second copy of any string or function
  CHECK(b.add_location(0x1100, m, {frame("f", "f.cc", 2)}) != a);
  CHECK(b.add_location(0x1100, 0, {frame("f", "f.cc", 1)}) != a);
  CHECK_EQ(a, uint64_t(1));
}

// pprof merges samples of one stack and one set of labels when it reads a
// profile; the file holds them merged already, so that every reader (the
// cli's own among them) counts the samples pprof counts.
TEST(samples_of_one_stack_and_labels_are_one) {
  const auto build = [](const std::vector<std::pair<int64_t, const char*>>& adds) {
    Builder b({{"samples", "count"}}, {"cpu", "nanoseconds"}, 1);
    uint64_t m = b.add_mapping(mapping(0x1000, 0x2000, "/bin/x", ""));
    uint64_t f = b.add_location(0x1100, m, {frame("f", "f.cc", 1)});
    uint64_t g = b.add_location(0x1200, m, {frame("g", "f.cc", 9)});
    for (const auto& a : adds) b.add_sample({f, g}, {a.first}, {str_label("thread_name", a.second)});
    return b.encode();
  };
  CHECK(build({{2, "t"}, {3, "t"}}) == build({{5, "t"}}));
  CHECK(build({{2, "t"}, {3, "u"}}) != build({{5, "t"}}));
  CHECK(build({{2, "t"}, {3, "u"}, {4, "t"}}) == build({{6, "t"}, {3, "u"}}));
}

TEST(check_valid_accepts_good_profile) {
  Builder* b = new_cpu_builder();
  build_cpu(b);
  CHECK_EQ(b->check_valid(), std::string());
  delete b;
}

TEST(check_valid_catches_wrong_value_count) {
  Builder* b = new_cpu_builder();
  build_cpu(b);
  b->add_sample({1}, {7});
  CHECK(!b->check_valid().empty());
  delete b;
}

TEST(check_valid_catches_unknown_default_type) {
  Builder* b = new_cpu_builder();
  build_cpu(b);
  b->set_default_sample_type("wall");
  CHECK(!b->check_valid().empty());
  delete b;
}

TEST(check_valid_catches_overlapping_mappings) {
  Builder* b = new_cpu_builder();
  build_cpu(b);
  CHECK(b->check_valid().empty());
  b->add_mapping(mapping(0x4ff000, 0x600000, "/opt/app/lib/other.so", ""));
  CHECK(!b->check_valid().empty());
  delete b;
}

TEST(check_valid_catches_bad_location_ids) {
  for (uint64_t bad : {uint64_t(0), uint64_t(99)}) {
    Builder* b = new_cpu_builder();
    build_cpu(b);
    b->add_sample({1, bad}, {1, 1});
    CHECK(!b->check_valid().empty());
    delete b;
  }
}

TEST(check_valid_catches_unknown_mapping) {
  Builder* b = new_cpu_builder();
  build_cpu(b);
  b->add_location(0x1234, 7, {});
  CHECK(!b->check_valid().empty());
  delete b;
}

TEST(go_pprof_reads_cpu_profile) {
  TempDir dir;
  std::string file = write_cpu_profile(dir);
  std::string raw = go_pprof(dir, "-raw", file);
  CHECK(has(raw, "PeriodType: cpu nanoseconds"));
  CHECK(has(raw, "Period: 10000000"));
  CHECK(has(raw, "samples/count cpu/nanoseconds"));
  CHECK(has(raw, "3   30000000:"));
  CHECK(has(raw, "5   50000000:"));
  CHECK(has(raw, "1   10000000:"));
  CHECK(has(raw, "thread_name:[worker 1]"));
  CHECK(has(raw, "thread_id:[4242]"));
  CHECK(has(raw, kPushBack));
  CHECK(has(raw, kCompute));
  CHECK(has(raw, kSpin));
  CHECK(has(raw, "/usr/include/c++/12/bits/stl_vector.h:1198"));
  CHECK(has(raw, "/opt/app/bin/server " + std::string(kBuildId)));
  CHECK(has(raw, "/opt/app/lib/libwidget.so"));
  CHECK(has(raw, "profshim test"));
}

TEST(go_pprof_top_cpu_flat_values) {
  TempDir dir;
  std::string file = write_cpu_profile(dir);
  std::string cpu = go_pprof(dir, "-top -sample_index=cpu", file);
  CHECK(has(cpu, "of 90ms total"));
  CHECK(flat_is(cpu, "spin", "50ms"));
  CHECK(flat_is(cpu, "push_back", "30ms"));  // the inlined frame is the leaf
  CHECK(flat_is(cpu, "Widget::compute", "0"));
  CHECK(flat_is(cpu, "main", "0"));
  std::string count = go_pprof(dir, "-top -sample_index=samples", file);
  CHECK(flat_is(count, "spin", "5"));
  CHECK(flat_is(count, "push_back", "3"));
}

namespace {

void build_heap(Builder* b) {
  uint64_t exe = b->add_mapping(mapping(0x400000, 0x500000, "/opt/app/bin/server", kBuildId));
  uint64_t op_new = b->add_location(0x401000, exe, {frame("operator new(unsigned long)", "", 0)});
  uint64_t grow =
      b->add_location(0x401100, exe, {frame("Cache<std::string>::grow(unsigned long)", "c.cc", 9)});
  uint64_t buf = b->add_location(0x401200, exe, {frame("make_buffer(int)", "b.cc", 5)});
  uint64_t main_loc = b->add_location(0x402000, exe, {frame("main", "/src/main.cc", 10)});
  b->add_sample({op_new, grow, main_loc}, {10, 10485760, 2, 2097152});
  b->add_sample({buf, main_loc}, {4, 4096, 0, 0});
  b->set_default_sample_type("inuse_space");
}

}  // namespace

TEST(go_pprof_reads_heap_profile) {
  TempDir dir;
  Builder b({{"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"},
             {"inuse_space", "bytes"}},
            {"space", "bytes"}, 524288);
  build_heap(&b);
  std::string file = dir.path + "/heap.pprof";
  CHECK(write_profile(b, file));
  std::string raw = go_pprof(dir, "-raw", file);
  CHECK(has(raw, "alloc_objects/count alloc_space/bytes inuse_objects/count "
                 "inuse_space/bytes[dflt]"));
  CHECK(has(raw, "10   10485760          2    2097152:"));
  CHECK(has(raw, "Cache<std::string>::grow(unsigned long)"));
  std::string inuse = go_pprof(dir, "-top", file);
  CHECK(has(inuse, "of 2MB total"));
  CHECK(flat_is(inuse, "operator new", "2MB"));
  std::string alloc = go_pprof(dir, "-sample_index=alloc_space -top -nodefraction=0", file);
  CHECK(flat_is(alloc, "operator new", "10240kB"));
  CHECK(flat_is(alloc, "make_buffer", "4kB"));
}

// Interning must keep 1e5 distinct locations and samples fast (hash maps,
// no linear scans); a quadratic slip takes minutes here, not 0.1 s.
TEST(hundred_thousand_samples_are_fast) {
  double t0 = check::thread_cpu_seconds();
  Builder b({{"samples", "count"}, {"cpu", "nanoseconds"}}, {"cpu", "nanoseconds"}, 10000000);
  uint64_t m = b.add_mapping(mapping(0x400000, 0x40000000, "/bin/big", ""));
  uint64_t root = b.add_location(0x400100, m, {frame("main", "m.cc", 1)});
  for (int i = 0; i < 100000; ++i) {
    std::string name = "fn_" + std::to_string(i % 5000) + "(int)";
    uint64_t loc = b.add_location(0x401000 + i, m, {frame(name, "f.cc", i % 700)});
    b.add_sample({loc, root}, {1, 10000000});
  }
  CHECK_EQ(b.check_valid(), std::string());
  std::string out = b.encode();
  double secs = check::thread_cpu_seconds() - t0;
  CHECK(out.size() > 100000 * 10);
  CHECK(secs < 5.0);
}
