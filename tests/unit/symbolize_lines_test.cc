// symbolize_lines_test: the line reader (symbolize_lines.cc) gives every
// address the row libdw's dwarf_getsrc_die gives it, and every file the
// name libdw's dwarf_filesrc gives it, unit by unit, on this binary
// (DWARF 5 from GCC), libc's debug file (libc6-dbg: dwz'd) and shared
// objects built here with DWARF 4 and 2 from sources in a directory of
// their own. The addresses asked are each row's address, one byte before
// and after it, and a sequence's end; a unit the reader hands back to libdw
// is counted and must not happen on these.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "check.h"
#include "symbolize.h"
#include "symbolize_internal.h"

namespace {

using symbolize::internal::dw;

struct Truth {  // what the test asks of libdw beyond the shim's own table
  decltype(&::dwarf_begin) begin = nullptr;
  decltype(&::dwarf_end) end = nullptr;
  decltype(&::dwarf_getsrclines) getsrclines = nullptr;
  decltype(&::dwarf_onesrcline) onesrcline = nullptr;
  decltype(&::dwarf_lineaddr) lineaddr = nullptr;
  decltype(&::dwarf_lineendsequence) lineendsequence = nullptr;
};

const Truth& truth() {
  static Truth t = [] {
    Truth t;
    std::string err;
    CHECK(symbolize::load_libdw(&err));
    void* h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(h != nullptr);
    if (!h) return t;
    t.begin = reinterpret_cast<decltype(t.begin)>(dlsym(h, "dwarf_begin"));
    t.end = reinterpret_cast<decltype(t.end)>(dlsym(h, "dwarf_end"));
    t.getsrclines = reinterpret_cast<decltype(t.getsrclines)>(dlsym(h, "dwarf_getsrclines"));
    t.onesrcline = reinterpret_cast<decltype(t.onesrcline)>(dlsym(h, "dwarf_onesrcline"));
    t.lineaddr = reinterpret_cast<decltype(t.lineaddr)>(dlsym(h, "dwarf_lineaddr"));
    t.lineendsequence = reinterpret_cast<decltype(t.lineendsequence)>(dlsym(h, "dwarf_lineendsequence"));
    return t;
  }();
  return t;
}

struct Tally {
  size_t units = 0, handed_back = 0, addresses = 0, with_line = 0, files = 0, differ = 0;
};

void compare_unit(Dwarf* dbg, Dwarf_Die* cu, Tally* t, const char* what) {
  const Truth& tr = truth();
  Dwarf_Lines* lines;
  size_t n;
  if (tr.getsrclines(cu, &lines, &n) != 0 || n == 0) return;  // no line table: nothing to compare
  std::vector<uint64_t> pcs;
  const size_t step = n > 4000 ? n / 4000 : 1;  // a bound on a huge unit's time, not its coverage of kinds
  for (size_t i = 0; i < n; i += step) {
    Dwarf_Addr a;
    if (tr.lineaddr(tr.onesrcline(lines, i), &a) != 0) continue;
    pcs.push_back(a);
    pcs.push_back(a + 1);
    if (a) pcs.push_back(a - 1);
  }
  std::sort(pcs.begin(), pcs.end());
  pcs.erase(std::unique(pcs.begin(), pcs.end()), pcs.end());
  symbolize::internal::UnitLines ul;
  ++t->units;
  if (!symbolize::internal::read_unit_lines(dbg, cu, pcs, &ul)) {
    ++t->handed_back;
    return;
  }
  CHECK(ul.ok && ul.pcs == pcs && ul.rows.size() == pcs.size());
  if (ul.rows.size() != pcs.size()) return;
  Dwarf_Files* files;
  size_t nfiles;
  if (dw().dwarf_getsrcfiles(cu, &files, &nfiles) == 0) {
    if (nfiles != ul.files.size()) {
      ++t->differ;
      std::fprintf(stderr, "  %s: %zu files, libdw %zu\n", what, ul.files.size(), nfiles);
    }
    for (size_t i = 0; i < nfiles && i < ul.files.size(); ++i) {
      ++t->files;
      const char* s = dw().dwarf_filesrc(files, i, nullptr, nullptr);
      if (!s || ul.files[i] != s) {
        if (++t->differ < 10)
          std::fprintf(stderr, "  %s: file %zu '%s', libdw '%s'\n", what, i, ul.files[i].c_str(), s ? s : "(null)");
      }
    }
  }
  for (size_t k = 0; k < pcs.size(); ++k) {
    ++t->addresses;
    Dwarf_Line* l = dw().dwarf_getsrc_die(cu, pcs[k]);
    const auto& row = ul.rows[k];
    int line = 0;
    const char* src = l ? dw().dwarf_linesrc(l, nullptr, nullptr) : nullptr;
    if (l) dw().dwarf_lineno(l, &line);
    const bool same = (l != nullptr) == row.found &&
                      (!l || (row.line == line && row.file < ul.files.size() && src && ul.files[row.file] == src));
    t->with_line += row.found;
    if (!same && ++t->differ < 10)
      std::fprintf(stderr, "  %s: %#llx: %s:%lld, libdw %s:%d\n", what, static_cast<unsigned long long>(pcs[k]),
                   row.found && row.file < ul.files.size() ? ul.files[row.file].c_str() : "-",
                   static_cast<long long>(row.line), src ? src : "-", line);
  }
}

Tally compare_file(const std::string& path) {
  Tally t;
  const Truth& tr = truth();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  CHECK(fd >= 0);
  if (fd < 0 || !tr.begin) return t;
  Dwarf* dbg = tr.begin(fd, DWARF_C_READ);
  CHECK(dbg != nullptr);
  if (dbg) {
    Dwarf_Off off = 0, next;
    size_t hsize;
    while (dw().dwarf_nextcu(dbg, off, &next, &hsize, nullptr, nullptr, nullptr) == 0) {
      Dwarf_Die cu;
      if (dw().dwarf_offdie(dbg, off + hsize, &cu)) compare_unit(dbg, &cu, &t, path.c_str());
      off = next;
    }
    tr.end(dbg);
  }
  close(fd);
  std::fprintf(stderr, "  %s: %zu units (%zu to libdw), %zu addresses (%zu with a line), %zu files, %zu differ\n",
               path.c_str(), t.units, t.handed_back, t.addresses, t.with_line, t.files, t.differ);
  return t;
}

void expect_same(const Tally& t) {
  CHECK(t.units > 0);
  CHECK(t.with_line > 0);
  CHECK_EQ(t.handed_back, size_t(0));
  CHECK_EQ(t.differ, size_t(0));
}

int find_libc(dl_phdr_info* info, size_t, void* out) {
  if (info->dlpi_name && std::strstr(info->dlpi_name, "/libc.so.6")) *static_cast<std::string*>(out) = info->dlpi_name;
  return 0;
}

}  // namespace

TEST(this_binary_gcc_dwarf5) { expect_same(compare_file("/proc/self/exe")); }

TEST(libc_debug_file) {
  std::string libc;
  dl_iterate_phdr(find_libc, &libc);
  CHECK(!libc.empty());
  int fd = open(libc.c_str(), O_RDONLY | O_CLOEXEC);
  CHECK(fd >= 0);
  if (fd < 0) return;
  Elf* e = dw().elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  const void* id = nullptr;
  const ssize_t n = e ? dw().dwelf_elf_gnu_build_id(e, &id) : -1;
  std::string hex;
  for (ssize_t i = 0; i < n; ++i) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", static_cast<const unsigned char*>(id)[i]);
    hex += b;
  }
  if (e) dw().elf_end(e);
  close(fd);
  CHECK(hex.size() > 2);
  if (hex.size() <= 2) return;
  const std::string debug = "/usr/lib/debug/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug";
  struct stat st;
  if (stat(debug.c_str(), &st) != 0) {
    std::fprintf(stderr, "  no %s: install libc6-dbg (scripts/install-deps should)\n", debug.c_str());
    CHECK(!"libc6-dbg is installed");
    return;
  }
  expect_same(compare_file(debug));
}

// Sources in a directory of their own, a header from another, a relative
// path given to the compiler: the table's directories are then used.
TEST(built_here_dwarf4_and_dwarf2) {
  char tmpl[] = "/tmp/profshim-lines-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  CHECK(dir != nullptr);
  if (!dir) return;
  const std::string d = dir;
  CHECK(mkdir((d + "/src").c_str(), 0700) == 0 && mkdir((d + "/inc").c_str(), 0700) == 0);
  for (const auto& f : {std::make_pair("/inc/h.h", "static inline int twice(int x) { return x * 2; }\n"),
                        std::make_pair("/src/a.c", "#include \"h.h\"\nint f(int x) {\n  int y = twice(x);\n"
                                                   "  return y + 1;\n}\nint g(int x) { return f(x) * 3; }\n")}) {
    std::FILE* out = std::fopen((d + f.first).c_str(), "w");
    CHECK(out != nullptr);
    if (!out) return;
    std::fputs(f.second, out);
    std::fclose(out);
  }
  for (const char* version : {"-gdwarf-4", "-gdwarf-2"}) {
    const std::string so = d + "/lib" + (version + 2) + ".so";
    const std::string cmd = "cd " + d + " && cc -shared -fPIC -O2 " + version + " -Iinc -o " + so + " src/a.c";
    CHECK(std::system(cmd.c_str()) == 0);
    expect_same(compare_file(so));
  }
  std::system(("rm -rf " + d).c_str());
}
