// symbolize_test: checks symbolize::Session on this test binary (built with
// -g), on libc (whose file:line needs libc6-dbg's separate debug file), on
// shared objects built at run time (stripped, deleted, with a debuglink, or
// shadowed by another file), and on addresses that have no function:
// unmapped memory, the [vdso] header, anonymous code.
#include "symbolize.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../fixtures/runtime_so.h"
#include "check.h"
#include "procmaps.h"

// --- code with known names, lines and inlining ---------------------------------

struct Probe {
  uint64_t pc = 0;
  int line = 0;       // the line of the probed call
  int call_line = 0;  // where the inlined function was called
};

// An address inside its caller's call instruction (return address minus one).
// The empty asm keeps the compiler from treating the call as pure.
extern "C" __attribute__((noinline)) uint64_t symtest_here() {
  asm volatile("" ::: "memory");
  return reinterpret_cast<uint64_t>(__builtin_return_address(0)) - 1;
}

static const int kCFunctionLine = __LINE__ + 1;
extern "C" __attribute__((noinline)) void symtest_c_function(Probe* p) {
  p->pc = symtest_here(); p->line = __LINE__;
  asm volatile("" ::: "memory");
}

namespace symtest {
template <typename T>
__attribute__((noinline)) T twice(T x, Probe* p) {
  p->pc = symtest_here(); p->line = __LINE__;
  asm volatile("" ::: "memory");
  return x + x;
}
template int twice<int>(int, Probe*);
}  // namespace symtest

static inline __attribute__((always_inline)) void symtest_inlined_leaf(Probe* p) {
  p->pc = symtest_here(); p->line = __LINE__;
}

__attribute__((noinline)) void symtest_inline_caller(Probe* p) {
  p->call_line = __LINE__; symtest_inlined_leaf(p);
  asm volatile("" ::: "memory");  // keeps the inlined call from being a tail call
}

// --- helpers ----------------------------------------------------------------------

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string read_maps() { return read_file("/proc/self/maps"); }

symbolize::Result lookup_one(symbolize::Session* s, uint64_t addr) {
  std::vector<symbolize::Result> out;
  s->lookup({addr}, &out);
  return out.size() == 1 ? out[0] : symbolize::Result();
}

std::string basename_of(const std::string& p) {
  size_t k = p.rfind('/');
  return k == std::string::npos ? p : p.substr(k + 1);
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool is_hex40(const std::string& s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

void print(const char* what, const symbolize::Result& r) {
  std::fprintf(stderr, "  %s: mapping %d, %zu frames\n", what, r.mapping, r.frames.size());
  for (const auto& f : r.frames)
    std::fprintf(stderr, "    %s [%s] %s:%lld (starts %lld)\n", f.name.c_str(), f.system_name.c_str(),
                 f.file.c_str(), static_cast<long long>(f.line), static_cast<long long>(f.start_line));
}

// One frame named like name_part, in this file, at line.
void expect_frame(const pprof::Frame& f, const char* name_part, int line) {
  CHECK(contains(f.name, name_part));
  CHECK_EQ(basename_of(f.file), std::string("symbolize_test.cc"));
  CHECK_EQ(f.line, static_cast<int64_t>(line));
}

std::string exe_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, n) : std::string();
}

// The address of a libc function, checked to really be libc's (not a PLT
// entry of this binary, nor a sanitizer's interceptor).
uint64_t libc_function(const char* name) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void* p = libc ? dlsym(libc, name) : nullptr;
  Dl_info info;
  if (!p || !dladdr(p, &info) || !info.dli_fname || !contains(info.dli_fname, "libc.so")) return 0;
  return reinterpret_cast<uint64_t>(p);
}

}  // namespace

// --- tests --------------------------------------------------------------------------

TEST(loads_libdw_twice) {
  std::string err;
  CHECK(symbolize::load_libdw(&err));
  CHECK(symbolize::load_libdw(&err));
  if (!err.empty()) std::fprintf(stderr, "  %s\n", err.c_str());
}

TEST(parses_maps_text) {
  auto lines = procmaps::parse(
      "55d0c0a00000-55d0c0a21000 r-xp 00001000 fe:01 1234 /opt/my app (deleted)\n"
      "7ffc1b3f0000-7ffc1b3f2000 r-xp 00000000 00:00 0                          [vdso]\n"
      "7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n"
      "garbage\n");
  CHECK_EQ(lines.size(), static_cast<size_t>(3));
  if (lines.size() != 3) return;
  CHECK_EQ(lines[0].start, 0x55d0c0a00000ull);
  CHECK_EQ(lines[0].offset, 0x1000ull);
  CHECK_EQ(lines[0].dev_major, 0xfeu);
  CHECK_EQ(lines[0].inode, 1234ull);
  CHECK_EQ(lines[0].path, std::string("/opt/my app (deleted)"));
  CHECK(lines[0].executable() && lines[0].is_file());
  CHECK_EQ(lines[1].path, std::string("[vdso]"));
  CHECK(!lines[1].is_file());
  CHECK(lines[2].path.empty() && lines[2].executable());
}

TEST(names_extern_c_function_with_file_and_line) {
  const int before = check::failures();
  Probe p;
  symtest_c_function(&p);
  symbolize::Session s(read_maps());
  auto r = lookup_one(&s, p.pc);
  CHECK(r.mapping >= 0);
  CHECK_EQ(r.frames.size(), static_cast<size_t>(1));
  if (!r.frames.empty()) {
    expect_frame(r.frames[0], "symtest_c_function", p.line);
    CHECK_EQ(r.frames[0].name, std::string("symtest_c_function"));
    CHECK_EQ(r.frames[0].start_line, static_cast<int64_t>(kCFunctionLine));
  }
  if (check::failures() > before) print("extern C", r);
}

TEST(demangles_template_in_namespace) {
  const int before = check::failures();
  Probe p;
  CHECK_EQ(symtest::twice<int>(21, &p), 42);
  symbolize::Session s(read_maps());
  auto r = lookup_one(&s, p.pc);
  CHECK_EQ(r.frames.size(), static_cast<size_t>(1));
  if (!r.frames.empty()) {
    expect_frame(r.frames[0], "symtest::twice<int>(int, Probe*)", p.line);
    CHECK_EQ(r.frames[0].system_name.rfind("_ZN7symtest5twiceIiEE", 0), static_cast<size_t>(0));
  }
  if (check::failures() > before) print("template", r);
}

TEST(inlined_call_gives_two_frames_innermost_first) {
  const int before = check::failures();
  Probe p;
  symtest_inline_caller(&p);
  symbolize::Session s(read_maps());
  auto r = lookup_one(&s, p.pc);
  CHECK_EQ(r.frames.size(), static_cast<size_t>(2));
  if (r.frames.size() == 2) {
    expect_frame(r.frames[0], "symtest_inlined_leaf", p.line);
    expect_frame(r.frames[1], "symtest_inline_caller", p.call_line);
  }
  CHECK(r.mapping >= 0 && s.mappings()[r.mapping].has_inline_frames);
  if (check::failures() > before) print("inline", r);
}

TEST(main_executable_mapping_comes_first_with_build_id) {
  const int before = check::failures();
  Probe p;
  symtest_c_function(&p);
  symbolize::Session s(read_maps());
  auto r = lookup_one(&s, p.pc);
  const auto& maps = s.mappings();
  CHECK(!maps.empty());
  if (maps.empty()) return;
  CHECK_EQ(maps[0].file, exe_path());
  CHECK(is_hex40(maps[0].build_id));
  CHECK(r.mapping >= 0 && maps[r.mapping].file == exe_path());
  CHECK(maps[0].has_functions && maps[0].has_filenames && maps[0].has_line_numbers);
  for (size_t i = 0; i < maps.size(); ++i) {
    CHECK(maps[i].limit > maps[i].start);
    for (size_t j = i + 1; j < maps.size(); ++j)
      CHECK(maps[i].limit <= maps[j].start || maps[j].limit <= maps[i].start);
  }
  if (check::failures() > before) std::fprintf(stderr, "  mapping 0: %s id '%s'\n", maps[0].file.c_str(), maps[0].build_id.c_str());
}

// The kernel lists the executable first anyway; with its lines moved last the
// session must still put it first.
TEST(main_executable_first_even_when_listed_last) {
  std::stringstream in(read_maps());
  std::string line, others, exe_lines;
  const std::string exe = exe_path();
  while (std::getline(in, line)) {
    bool is_exe = line.size() > exe.size() && line.compare(line.size() - exe.size(), exe.size(), exe) == 0;
    (is_exe ? exe_lines : others) += line + "\n";
  }
  CHECK(!exe_lines.empty());
  symbolize::Session s(others + exe_lines);
  CHECK(!s.mappings().empty() && s.mappings()[0].file == exe);
  CHECK(s.mappings().size() > 1 && s.mappings()[1].file != exe);
}

TEST(libc_function_named_with_build_id) {
  const int before = check::failures();
  uint64_t getpid_addr = libc_function("getpid");
  CHECK(getpid_addr != 0);
  symbolize::Session s(read_maps());
  auto r = lookup_one(&s, getpid_addr + 1);
  CHECK(r.mapping >= 0);
  CHECK(!r.frames.empty());
  if (!r.frames.empty()) CHECK_EQ(r.frames.back().name, std::string("getpid"));
  if (r.mapping >= 0) {
    const auto& m = s.mappings()[r.mapping];
    // libc.so.6, or libc-2.31.so before glibc 2.34 (Debian 11).
    CHECK(contains(m.file, "libc.so") || contains(m.file, "libc-2."));
    CHECK(is_hex40(m.build_id));
    CHECK(m.has_functions);
  }
  if (check::failures() > before) print("getpid", r);
}

// File and line in libc come only from its separate debug file, found by
// build ID under /usr/lib/debug/.build-id/: the package libc6-dbg.
TEST(libc_file_and_line_from_build_id_debug_file) {
  const int before = check::failures();
  uint64_t qsort_addr = libc_function("qsort");
  CHECK(qsort_addr != 0);
  symbolize::Session s(read_maps());
  auto r = lookup_one(&s, qsort_addr + 1);
  CHECK(r.mapping >= 0);
  if (r.mapping < 0) return;
  const std::string id = s.mappings()[r.mapping].build_id;
  CHECK(is_hex40(id));
  if (id.size() < 3) return;
  const std::string debug = "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
  struct stat st;
  if (stat(debug.c_str(), &st) != 0) {
    std::fprintf(stderr, "  no %s: install libc6-dbg (scripts/install-deps should)\n", debug.c_str());
    CHECK(!"libc6-dbg is installed");
    return;
  }
  CHECK(!r.frames.empty());
  if (!r.frames.empty()) {
    CHECK_EQ(r.frames.back().name, std::string("qsort"));
    CHECK(!r.frames[0].file.empty());
    CHECK(r.frames[0].line > 0);
  }
  CHECK(s.mappings()[r.mapping].has_line_numbers);
  if (check::failures() > before) print("qsort", r);
}

// A module without a local debug file must not make libdwfl ask debuginfod:
// that loads libcurl and goes to the network while the process is stopping.
TEST(never_loads_debuginfod) {
  setenv("DEBUGINFOD_URLS", "http://127.0.0.1:9/", 1);
  {
    symbolize::Session s(read_maps());
    std::vector<uint64_t> addrs;
    for (const auto& m : s.mappings()) addrs.push_back(m.start + (m.limit - m.start) / 2);
    std::vector<symbolize::Result> out;
    s.lookup(addrs, &out);
    CHECK_EQ(out.size(), addrs.size());
  }
  unsetenv("DEBUGINFOD_URLS");
  CHECK(!contains(read_maps(), "libdebuginfod"));
}

TEST(unmapped_and_data_addresses_have_no_mapping) {
  static int data_word = 1;
  std::vector<char> heap(64);
  symbolize::Session s(read_maps());
  for (uint64_t a : {uint64_t{0x10}, reinterpret_cast<uint64_t>(&data_word),
                     reinterpret_cast<uint64_t>(heap.data()), ~uint64_t{0} - 0x100}) {
    auto r = lookup_one(&s, a);
    CHECK_EQ(r.mapping, -1);
    CHECK(r.frames.empty());
  }
}

TEST(stripped_shared_object_names_only_exported_functions) {
  const int before = check::failures();
  const std::string dir = runtime_so::make_temp_dir();
  runtime_so::Loaded fx = runtime_so::load(runtime_so::build(dir, "symstrip", true), "symstrip");
  const std::string maps = read_maps();
  symbolize::Session s(maps);
  std::vector<symbolize::Result> out;
  s.lookup({fx.exported + 1, fx.hidden + 1}, &out);  // while the file is there
  runtime_so::remove_dir(dir);
  CHECK(fx.exported != 0 && fx.hidden != 0);
  if (!fx.exported || !fx.hidden) return;
  CHECK(fx.hidden > fx.exported);  // else the trap is not set
  const symbolize::Result& e = out[0];
  CHECK_EQ(e.frames.size(), static_cast<size_t>(1));
  if (!e.frames.empty()) CHECK_EQ(e.frames[0].name, std::string("symstrip_exported"));
  CHECK(e.mapping >= 0 && contains(s.mappings()[e.mapping].file, "libsymstrip.so"));
  const symbolize::Result& hd = out[1];
  CHECK(hd.mapping >= 0 && hd.mapping == e.mapping);
  CHECK(hd.frames.empty());
  if (check::failures() > before) { print("exported", e); print("hidden", hd); }
}

// objcopy --only-keep-debug + --add-gnu-debuglink, the debug file in .debug/
// next to the binary: found by its .gnu_debuglink name, checked by build ID.
TEST(separate_debug_file_found_by_debuglink) {
  const int before = check::failures();
  const std::string dir = runtime_so::make_temp_dir();
  const std::string so = runtime_so::build(dir, "symlink", false);
  const std::string objcopy = runtime_so::tool("objcopy");
  const std::string cmd = "mkdir -p " + dir + "/.debug && " + objcopy + " --only-keep-debug " + so + " " + dir +
                          "/.debug/libsymlink.so.debug && " + runtime_so::tool("strip") + " --strip-all " + so +
                          " && " + objcopy + " --add-gnu-debuglink=" + dir + "/.debug/libsymlink.so.debug " + so;
  CHECK(!so.empty() && std::system(cmd.c_str()) == 0);
  runtime_so::Loaded fx = runtime_so::load(so, "symlink");
  CHECK(fx.hidden != 0);
  if (fx.hidden) {
    symbolize::Session s(read_maps());
    auto r = lookup_one(&s, fx.hidden + 1);
    CHECK(r.frames.size() == 1 && r.frames[0].name == "symlink_hidden" && r.frames[0].line > 0);
    if (check::failures() > before) print("hidden", r);
  }
  runtime_so::remove_dir(dir);
}

// A file that was deleted (an upgrade replaced it) is read through
// /proc/self/map_files when the kernel lets this process open that; when it
// does not, its addresses get their mapping and no names.
TEST(deleted_shared_object_named_through_map_files_or_not_at_all) {
  const int before = check::failures();
  const std::string dir = runtime_so::make_temp_dir();
  runtime_so::Loaded fx = runtime_so::load(runtime_so::build(dir, "symdel", false), "symdel");
  runtime_so::remove_dir(dir);
  CHECK(fx.exported != 0 && fx.hidden != 0);
  if (!fx.exported || !fx.hidden) return;
  const std::string maps = read_maps();
  CHECK(contains(maps, "libsymdel.so (deleted)"));
  symbolize::Session s(maps);
  auto e = lookup_one(&s, fx.exported + 1);
  auto hd = lookup_one(&s, fx.hidden + 1);
  CHECK(e.mapping >= 0 && contains(s.mappings()[e.mapping].file, "(deleted)"));
  char link[80];
  std::snprintf(link, sizeof link, "/proc/self/map_files/%llx-%llx",
                static_cast<unsigned long long>(s.mappings()[e.mapping].start),
                static_cast<unsigned long long>(s.mappings()[e.mapping].limit));
  int fd = open(link, O_RDONLY);
  if (fd >= 0) {
    close(fd);
    CHECK(e.frames.size() == 1 && e.frames[0].name == "symdel_exported" && e.frames[0].line > 0);
    CHECK(hd.frames.size() == 1 && hd.frames[0].name == "symdel_hidden");
  } else {
    CHECK(e.frames.empty() && hd.frames.empty());
  }
  if (check::failures() > before) { print("exported", e); print("hidden", hd); }
}

// maps naming another ELF file at the path (a rebuilt binary, a different
// container image): its build ID differs from the one in memory, so it must
// lend no names.
TEST(file_with_other_build_id_lends_no_names) {
  const int before = check::failures();
  const std::string dir = runtime_so::make_temp_dir();
  runtime_so::Loaded fx = runtime_so::load(runtime_so::build(dir, "symreal", false), "symreal");
  const std::string other = runtime_so::build(dir, "symothr", false);  // same layout, other names
  CHECK(fx.exported != 0 && !other.empty());
  if (fx.exported && !other.empty()) {
    std::string maps = read_maps();
    symbolize::Session real(maps);
    auto r = lookup_one(&real, fx.exported + 1);
    CHECK(!r.frames.empty() && r.frames[0].name == "symreal_exported");
    for (size_t at; (at = maps.find(fx.path)) != std::string::npos;) maps.replace(at, fx.path.size(), other);
    symbolize::Session swapped(maps);
    auto w = lookup_one(&swapped, fx.exported + 1);
    CHECK(w.mapping >= 0);
    CHECK(w.frames.empty());
    if (check::failures() > before) { print("real", r); print("swapped", w); }
  }
  runtime_so::remove_dir(dir);
}

TEST(vdso_has_a_mapping_and_no_wrong_names) {
  uint64_t vdso = getauxval(AT_SYSINFO_EHDR);
  if (!vdso) return;  // no vdso on this system: nothing to check
  symbolize::Session s(read_maps());
  auto header = lookup_one(&s, vdso + 0x10);  // inside the ELF header: no function
  CHECK(header.mapping >= 0 && s.mappings()[header.mapping].file == "[vdso]");
  CHECK(header.frames.empty());
  // Its exported functions do get names, all of them vdso functions.
  int named = 0;
  for (uint64_t a = vdso; a < vdso + 0x2000; a += 4) {
    auto r = lookup_one(&s, a);
    if (r.mapping < 0 || r.frames.empty()) continue;
    ++named;
    const std::string& n = r.frames.back().name;
    if (!(contains(n, "time") || contains(n, "getcpu") || contains(n, "clock") ||
          contains(n, "sgx") || contains(n, "getrandom"))) {
      std::fprintf(stderr, "  unexpected vdso name %s\n", n.c_str());
      CHECK(!"vdso names are vdso functions");
    }
  }
  CHECK(named > 0);
}

TEST(anonymous_code_has_a_mapping_and_no_frames) {
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(p != MAP_FAILED);
  if (p == MAP_FAILED) return;
  symbolize::Session s(read_maps());
  auto r = lookup_one(&s, reinterpret_cast<uint64_t>(p) + 100);
  CHECK(r.mapping >= 0 && s.mappings()[r.mapping].file.empty());
  CHECK(r.frames.empty());
  munmap(p, 4096);
}

// 50k distinct addresses spread over this binary's and libc's code, DWARF
// and all, in seconds of CPU, not minutes (the stop has a deadline).
TEST(fifty_thousand_addresses_in_well_under_a_second) {
  symbolize::Session s(read_maps());
  std::vector<uint64_t> addrs;
  const size_t want = 50000;
  uint64_t total = 0;
  for (const auto& m : s.mappings())
    if (m.file == exe_path() || contains(m.file, "libc.so")) total += m.limit - m.start;
  CHECK(total > 0);
  if (!total) return;
  const uint64_t step = std::max<uint64_t>(1, total / want);
  for (const auto& m : s.mappings())
    if (m.file == exe_path() || contains(m.file, "libc.so"))
      for (uint64_t a = m.start + step / 2; a < m.limit && addrs.size() < want; a += step) addrs.push_back(a);
  std::vector<symbolize::Result> out;
  double t0 = check::thread_cpu_seconds();
  s.lookup(addrs, &out);
  double secs = check::thread_cpu_seconds() - t0;
  size_t named = 0;
  for (const auto& r : out) named += !r.frames.empty();
  const int before = check::failures();
  CHECK_EQ(out.size(), addrs.size());
  CHECK(addrs.size() > want * 9 / 10);
  CHECK(named > addrs.size() / 2);
  // ~0.6 s of CPU here; PROFSHIM_TEST_CPU_SCALE: an emulator's slowdown (tests/arm64/run.py).
  const char* scale = getenv("PROFSHIM_TEST_CPU_SCALE");
  CHECK(secs < 3.0 * (scale && atof(scale) >= 1 ? atof(scale) : 1.0));
  if (check::failures() > before)
    std::fprintf(stderr, "  %zu addresses, %zu named, %.3f s\n", addrs.size(), named, secs);
}

// Past the names' deadline an address keeps its mapping and gets no frames
// (the profile is written unsymbolized rather than late); before it, names.
TEST(past_the_deadline_addresses_keep_their_mapping_and_get_no_names) {
  Probe p;
  symtest_c_function(&p);
  {
    symbolize::Session s(read_maps());
    std::vector<symbolize::Result> out;
    CHECK_EQ(s.lookup({p.pc, p.pc + 1}, &out, 1), static_cast<size_t>(2));  // long past
    CHECK_EQ(out.size(), static_cast<size_t>(2));
    for (const auto& r : out) {
      CHECK(r.mapping >= 0);
      CHECK(r.frames.empty());
    }
    if (!out.empty() && out[0].mapping >= 0) CHECK(!s.mappings()[out[0].mapping].has_functions);
  }
  symbolize::Session s(read_maps());
  std::vector<symbolize::Result> out;
  CHECK_EQ(s.lookup({p.pc}, &out, ~0ull), static_cast<size_t>(0));
  CHECK(out.size() == 1 && !out[0].frames.empty());
}
