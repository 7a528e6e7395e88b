// symbolize_names_test: a function has one name whether it was inlined or
// not, two lambdas never share one, a compiler's clone is named as the
// function it was cloned from, and source files are named absolutely. The functions probed are in this binary
// (built -O2 -g): static, in an anonymous namespace, lambdas — none of which
// GCC gives a DWARF linkage name.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"
#include "symbolize.h"
#include "symbolize_internal.h"

namespace {

// An address inside its caller's call instruction (return address minus one).
extern "C" __attribute__((noinline)) uint64_t names_here() {
  asm volatile("" ::: "memory");
  return reinterpret_cast<uint64_t>(__builtin_return_address(0)) - 1;
}

// Inlined wherever it is called directly, and out of line through a pointer.
static inline __attribute__((always_inline)) uint64_t twofold(uint64_t* pc, long k) {
  *pc = names_here();
  asm volatile("" ::: "memory");
  return k * 2;
}

__attribute__((noinline)) uint64_t call_twofold_inlined(uint64_t* pc) { return twofold(pc, 1) + 1; }

__attribute__((noinline)) uint64_t call_twofold_outline(uint64_t (*volatile f)(uint64_t*, long), uint64_t* pc) {
  return f(pc, 2) + 1;
}

// Two lambdas of one signature, both inlined.
__attribute__((noinline)) void two_lambdas(uint64_t* a, uint64_t* b) {
  auto first = [](uint64_t* pc) __attribute__((always_inline)) { *pc = names_here(); };
  auto second = [](uint64_t* pc) __attribute__((always_inline)) { *pc = names_here(); };
  first(a);
  asm volatile("" ::: "memory");
  second(b);
  asm volatile("" ::: "memory");
}

std::string read_maps() {
  std::ifstream f("/proc/self/maps");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<symbolize::Result> lookup(const std::vector<uint64_t>& addrs) {
  symbolize::Session s(read_maps());
  std::vector<symbolize::Result> out;
  s.lookup(addrs, &out);
  return out;
}

void print(const char* what, const symbolize::Result& r) {
  std::fprintf(stderr, "  %s:\n", what);
  for (const auto& f : r.frames)
    std::fprintf(stderr, "    %s [%s] %s:%lld\n", f.name.c_str(), f.system_name.c_str(), f.file.c_str(),
                 static_cast<long long>(f.line));
}

}  // namespace

TEST(rust_legacy_names_read_as_rust_writes_them) {
  symbolize::internal::Names n;
  // rustc 1.63's legacy mangling of rs_work::store::Index<K>::churn.
  CHECK_EQ(n.demangle("_ZN7rs_work5store14Index$LT$K$GT$5churn17h04471247aedfa425E"),
           std::string("rs_work::store::Index<K>::churn"));
  CHECK_EQ(n.demangle("_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$closure$u7d$$u7d$$GT$17h2a1c1bd6a5a8e4f2E"),
           std::string("core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>"));
  CHECK_EQ(n.demangle("_ZN3foo3bar17h0123456789abcdefE"), std::string("foo::bar"));
  // A trait impl's path starts with an escape; LLVM may add a suffix.
  CHECK_EQ(n.demangle("_ZN71_$LT$core..hash..sip..Hasher$LT$S$GT$$u20$as$u20$core..hash..Hasher$GT$5write17h4f7b3dff0b6ade53E.llvm.1075200226863813781"),
           std::string("<core::hash::sip::Hasher<S> as core::hash::Hasher>::write"));
  // A C++ name whose last part merely looks like a hash is C++'s.
  CHECK_EQ(n.demangle("_ZN3foo17hxyz456789abcdefgE"), std::string("foo::hxyz456789abcdefg"));
}

TEST(rust_v0_names_read_as_rust_writes_them) {
  symbolize::internal::Names n;
  // rustc 1.95's v0 manglings (its default): a crate's disambiguator
  // ("Cs8k9lrh6qK3m_") is left out as the legacy hash is.
  CHECK_EQ(n.demangle("_RNvCs8k9lrh6qK3m_7rs_work3fib"), std::string("rs_work::fib"));
  CHECK_EQ(n.demangle("_RNvCslUGVqVTVKpS_7rs_prog4main"), n.demangle("_ZN7rs_prog4main17hf20af7438b282036E"));
  // An instance of a generic function, and a trait's method for an instance
  // of a generic type: v0 records the type arguments, legacy does not.
  CHECK_EQ(n.demangle("_RINvCslUGVqVTVKpS_7rs_prog4burnmEB2_"), std::string("rs_prog::burn::<u32>"));
  CHECK_EQ(n.demangle("_RNvXCslUGVqVTVKpS_7rs_progINtB2_5MixermENtB2_4Spin4spinB2_"),
           std::string("<rs_prog::Mixer<u32> as rs_prog::Spin>::spin"));
  CHECK_EQ(n.demangle("_RNCINvNtCsjrHSEGnQ3l9_3std2rt10lang_startuE0CslUGVqVTVKpS_7rs_prog"),
           std::string("std::rt::lang_start::<()>::{closure#0}"));
  // LLVM's suffix and a split part's are not part of the name.
  CHECK_EQ(n.demangle("_RNvCs8k9lrh6qK3m_7rs_work3fib.llvm.1075200226863813781"), std::string("rs_work::fib"));
  CHECK_EQ(n.demangle("_RNvCs8k9lrh6qK3m_7rs_work3fib.cold"), std::string("rs_work::fib"));
  // What does not parse whole stays as it was, never half demangled.
  CHECK_EQ(n.demangle("_RNvCs8k9lrh6qK3m_7rs_work3fi"), std::string("_RNvCs8k9lrh6qK3m_7rs_work3fi"));
  CHECK_EQ(n.demangle("_Rjunk"), std::string("_Rjunk"));
}

// A v0 name whose each level refers back to the one before twice: 2^levels
// copies of a tuple when printed (30 levels: 16 GB from 259 bytes).
static std::string doubling_v0_name(int levels) {
  auto b62 = [](size_t v) {
    static const char d[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    if (v == 0) return std::string("_");
    std::string s;
    for (--v;; v /= 62) {
      s.insert(s.begin(), d[v % 62]);
      if (v < 62) break;
    }
    return s + "_";
  };
  std::string body = "INvC1a1f";
  size_t prev = body.size();
  body += "TuuE";
  for (int k = 0; k < levels; ++k) {
    size_t at = body.size();
    std::string r = "B" + b62(prev);
    body += "T" + r + r + "E";
    prev = at;
  }
  return "_R" + body + "E";
}

TEST(a_rust_name_that_would_print_gigabytes_stays_as_it_is) {
  // The stop ran out of its time bound (and took 1.75 GB) on one such
  // symbol in the program; now its name is given up at 64 KiB.
  symbolize::internal::Names n;
  const std::string sym = doubling_v0_name(30);
  CHECK_EQ(n.demangle(sym.c_str()), sym);
  // One that prints less than the bound is demangled as any.
  const std::string small = doubling_v0_name(3);
  CHECK(n.demangle(small.c_str()) != small);
  CHECK(n.demangle(small.c_str()).find("a::f::<") == 0);
}

TEST(clone_suffixes_are_not_part_of_the_name) {
  symbolize::internal::Names n;
  CHECK_EQ(n.demangle("_ZN2wlL6partlyEml.constprop.0"), std::string("wl::partly(unsigned long, long)"));
  CHECK_EQ(n.demangle("_ZL6workerPv.isra.0"), std::string("worker(void*)"));
  CHECK_EQ(n.demangle("_Z3foov.cold"), std::string("foo()"));
  CHECK_EQ(n.demangle("sym_hot.constprop.0"), std::string("sym_hot"));
  CHECK_EQ(n.demangle("sym_hot.part.0"), std::string("sym_hot"));
  CHECK_EQ(n.demangle("helper.lto_priv.0"), std::string("helper"));
  CHECK_EQ(n.demangle("main"), std::string("main"));
  CHECK_EQ(n.demangle("_Z5twiceIiET_S0_"), std::string("int twice<int>(int)"));
  // A dot that starts no clone suffix stays.
  CHECK_EQ(n.demangle("name.with.dots"), std::string("name.with.dots"));
  CHECK_EQ(n.demangle(".annobin_init.c"), std::string(".annobin_init.c"));
}

TEST(static_function_has_one_name_inlined_or_not) {
  uint64_t in_pc = 0, out_pc = 0;
  call_twofold_inlined(&in_pc);
  call_twofold_outline(twofold, &out_pc);
  auto r = lookup({in_pc, out_pc});
  CHECK_EQ(r.size(), static_cast<size_t>(2));
  if (r.size() != 2) return;
  // Inlined: [twofold, its caller]; out of line: twofold is the function.
  CHECK_EQ(r[0].frames.size(), static_cast<size_t>(2));
  CHECK(!r[1].frames.empty());
  if (r[0].frames.size() == 2 && !r[1].frames.empty()) {
    CHECK_EQ(r[0].frames[0].name, r[1].frames[0].name);
    CHECK(r[0].frames[0].name.find("twofold(") != std::string::npos);
    CHECK_EQ(r[0].frames[1].name, std::string("(anonymous namespace)::call_twofold_inlined(unsigned long*)"));
  }
  if (check::failures()) print("inlined", r[0]), print("out of line", r[1]);
}

TEST(two_inlined_lambdas_have_two_names) {
  uint64_t a = 0, b = 0;
  two_lambdas(&a, &b);
  auto r = lookup({a, b});
  CHECK_EQ(r.size(), static_cast<size_t>(2));
  if (r.size() != 2) return;
  CHECK_EQ(r[0].frames.size(), static_cast<size_t>(2));
  CHECK_EQ(r[1].frames.size(), static_cast<size_t>(2));
  if (r[0].frames.size() != 2 || r[1].frames.size() != 2) return;
  const std::string scope = "(anonymous namespace)::two_lambdas(unsigned long*, unsigned long*)::";
  CHECK_EQ(r[0].frames[0].name, scope + "{lambda(unsigned long*)#1}::operator()(unsigned long*) const");
  CHECK_EQ(r[1].frames[0].name, scope + "{lambda(unsigned long*)#2}::operator()(unsigned long*) const");
  CHECK_EQ(r[0].frames[1].name, std::string("(anonymous namespace)::two_lambdas(unsigned long*, unsigned long*)"));
  if (check::failures()) print("first", r[0]), print("second", r[1]);
}

TEST(relative_source_names_join_the_compilation_directory) {
  using symbolize::internal::join_path;
  CHECK_EQ(join_path("/src/proj", "./ha.h"), std::string("/src/proj/ha.h"));
  CHECK_EQ(join_path("/src/proj", "lib/./x.c"), std::string("/src/proj/lib/x.c"));
  CHECK_EQ(join_path("/src/proj/", "x.c"), std::string("/src/proj/x.c"));
  CHECK_EQ(join_path("/src/proj", "/usr/include/stdio.h"), std::string("/usr/include/stdio.h"));
  CHECK_EQ(join_path("/src/proj", "../common/y.h"), std::string("/src/proj/../common/y.h"));
  CHECK_EQ(join_path("/src//proj", ".//a.c"), std::string("/src/proj/a.c"));
  CHECK_EQ(join_path("", "./a.c"), std::string("a.c"));
  CHECK_EQ(join_path("/", "a.c"), std::string("/a.c"));
}
