// symbolize_ghc_test: GHC's symbols read as a Haskell programmer writes the
// names (symbols as GHC 9.0 writes them), anything else left as it is, and
// only in images GHC made.
#include <string>
#include <vector>

#include "check.h"
#include "symbolize_ghc.h"

namespace {

using symbolize::ghc::function_name;

// The Haskell name, or "-" when sym is not read as one.
std::string haskell(const char* sym) {
  std::string out;
  return function_name(sym, &out) ? out : "-";
}

std::string decoded(const char* z) {
  std::string out;
  return symbolize::ghc::z_decode(z, &out) ? out : "-";
}

symbolize::internal::ModInfo module(const char* path, std::vector<const char*> syms) {
  symbolize::internal::ModInfo mi;
  mi.path = path;
  uint64_t at = 0x1000;
  for (const char* s : syms) mi.syms.push_back({at, at + 16, s, 0}), at += 16;
  mi.syms_loaded = true;
  return mi;
}

std::vector<pprof::Frame> frames(std::vector<const char*> syms) {
  std::vector<pprof::Frame> out;
  for (const char* s : syms) out.push_back(pprof::Frame{s, s, "", 0, 0});
  return out;
}

}  // namespace

TEST(ghc_symbols_read_as_haskell_names) {
  CHECK_EQ(haskell("textzm1zi2zi5zi0_DataziText_concat_info"), std::string("text-1.2.5.0:Data.Text.concat"));
  CHECK_EQ(haskell("ghczmprim_GHCziClasses_zeze_info"), std::string("ghc-prim:GHC.Classes.=="));
  CHECK_EQ(haskell("Main_zdwfib_info"), std::string("Main.$wfib"));
  CHECK_EQ(haskell("base_GHCziBase_zpzp_info"), std::string("base:GHC.Base.++"));
  CHECK_EQ(haskell("Main_main_info"), std::string("Main.main"));
  CHECK_EQ(haskell("ZCMain_main_info"), std::string(":Main.main"));  // GHC's wrapper of main
  CHECK_EQ(haskell("base_GHCziShow_zdwitoszq_info"), std::string("base:GHC.Show.$witos'"));
  CHECK_EQ(haskell("ghczmprim_GHCziClasses_modIntzh_info"), std::string("ghc-prim:GHC.Classes.modInt#"));
  CHECK_EQ(haskell("base_GHCziIOziEncodingziUTF16_zdwutf16zudecode_slow"),
           std::string("base:GHC.IO.Encoding.UTF16.$wutf16_decode"));
  CHECK_EQ(haskell("base_GHCziWeak_runFinalizzerBatch2_info"), std::string("base:GHC.Weak.runFinalizerBatch2"));
}

TEST(every_kind_of_label_names_its_function) {
  for (const char* kind : {"info", "entry", "slow", "fast", "closure", "bytes", "srt"})
    CHECK_EQ(haskell(("Main_go_" + std::string(kind)).c_str()), std::string("Main.go"));
  CHECK_EQ(haskell("ghczmprim_GHCziTypes_ZMZN_con_info"), std::string("ghc-prim:GHC.Types.[]"));
  CHECK_EQ(haskell("ghczmprim_GHCziTypes_ZC_con_entry"), std::string("ghc-prim:GHC.Types.:"));
  CHECK_EQ(haskell("Main_Leaf_static_info"), std::string("Main.Leaf"));
  // A function named con is not a constructor's label.
  CHECK_EQ(haskell("Main_con_info"), std::string("Main.con"));
  CHECK_EQ(haskell("base_GHCziBase_con_info"), std::string("base:GHC.Base.con"));
  CHECK_EQ(haskell("Main_go"), std::string("-"));  // no kind: not a label GHC writes
  CHECK_EQ(haskell("Main_go_ret2"), std::string("-"));
}

TEST(units_show_their_version_not_their_build) {
  CHECK_EQ(haskell("mypkgzm0zi1zi0zi0zminplace_MyziMod_run_info"), std::string("mypkg-0.1.0.0:My.Mod.run"));
  CHECK_EQ(haskell("textzm2zi0zi2zm8a1b2c3d4e5f_DataziText_pack_info"), std::string("text-2.0.2:Data.Text.pack"));
  CHECK_EQ(haskell("ghczmbignum_GHCziNumziInteger_integerAdd_info"),
           std::string("ghc-bignum:GHC.Num.Integer.integerAdd"));
  CHECK_EQ(haskell("Cabalzm3zi4zi1zi0_DistributionziSimple_defaultMain_info"),
           std::string("Cabal-3.4.1.0:Distribution.Simple.defaultMain"));
}

TEST(z_encoding_decoded) {
  CHECK_EQ(decoded("ZLZRZMZNZCZZ"), std::string("()[]:Z"));
  CHECK_EQ(decoded("zzzazbzczdzezgzhzizlzmznzpzqzrzsztzuzv"), std::string("z&|^$=>#.<-!+'\\/*_%"));
  CHECK_EQ(decoded("Z0T"), std::string("()"));
  CHECK_EQ(decoded("Z3T"), std::string("(,,)"));
  CHECK_EQ(decoded("Z1H"), std::string("(# #)"));
  CHECK_EQ(decoded("Z2H"), std::string("(#,#)"));
  CHECK_EQ(decoded("Z12T"), std::string("(,,,,,,,,,,,)"));  // the arity is decimal
  CHECK_EQ(decoded("z3bbU"), std::string("\xce\xbb"));      // U+3BB, lambda
  CHECK_EQ(decoded("z0e9U"), std::string("\xc3\xa9"));      // a 0 before a letter-led code point
  CHECK_EQ(decoded("fz1f600Ux"), std::string("f\xf0\x9f\x98\x80x"));
  // Not Z-encoding: an unknown escape, an unended one, a character GHC encodes.
  CHECK_EQ(decoded("zx"), std::string("-"));
  CHECK_EQ(decoded("ZA"), std::string("-"));
  CHECK_EQ(decoded("z"), std::string("-"));
  CHECK_EQ(decoded("z3bb"), std::string("-"));
  CHECK_EQ(decoded("Z3"), std::string("-"));
  CHECK_EQ(decoded("z110000U"), std::string("-"));  // beyond Unicode
  CHECK_EQ(decoded("z0d800U"), std::string("-"));  // a surrogate
  CHECK_EQ(decoded("zd800U"), std::string("$800U"));  // no digit after z: "zd" is $
  CHECK_EQ(decoded("a.b"), std::string("-"));
}

TEST(other_symbols_stay_as_they_are) {
  for (const char* sym : {"stg_upd_frame_info", "stg_ap_p_fast", "stg_IND_STATIC_info", "stg_gc_noregs",
                          "__stg_EAGER_BLACKHOLE_info", "s1a2_info", "r4nd_info", "c4tN_info",
                          "evacuate_hash_entry", "get_new_entry", "forkOS_entry", "hs_atomic_add16",
                          "main", "hs_main", "_info", "Main__info", "Main_fib_", "base_ghcziBase_map_info",
                          "base_GHCzizi_map_info", "base_GHCziBase_zx_info", "a_b_C_d_e_info",
                          "memcpy", "_ZN3foo3barEv", "ZCMain_info", "ZC_main_info"})
    if (haskell(sym) != "-") {
      std::fprintf(stderr, "  %s read as %s\n", sym, haskell(sym).c_str());
      CHECK(false);
    }
}

TEST(only_images_ghc_made) {
  using symbolize::ghc::compiled_by_ghc;
  using symbolize::internal::Dynamic;
  // A Haskell library, by file name or by soname (a copy under another name).
  CHECK(compiled_by_ghc(module("/usr/lib/ghc/base-4.15.1.0/libHSbase-4.15.1.0-ghc9.0.2.so", {}), nullptr));
  Dynamic lib{"libHSbase-4.15.1.0-ghc9.0.2.so", {"libc.so.6"}};
  CHECK(compiled_by_ghc(module("/opt/app/base.so", {}), &lib));
  // A program linked with them.
  Dynamic prog{"", {"libHStext-1.2.5.0-ghc9.0.2.so", "libHSrts-ghc9.0.2.so", "libc.so.6"}};
  CHECK(compiled_by_ghc(module("/tmp/prog", {"Main_main_info"}), &prog));
  // A program with the RTS linked in.
  Dynamic libc_only{"", {"libc.so.6"}};
  CHECK(compiled_by_ghc(module("/tmp/prog", {"main", "hs_main", "hs_init_ghc", "Main_main_info"}), &libc_only));
  // C code: a library, a program.
  Dynamic crypto{"libcrypto.so.3", {"libc.so.6"}};
  CHECK(!compiled_by_ghc(module("/usr/lib/x86_64-linux-gnu/libcrypto.so.3", {"X509_get_info", "hs_init"}),
                         &crypto));
  CHECK(!compiled_by_ghc(module("/usr/bin/hsfoo", {"main", "X509_get_info"}), &libc_only));
}

TEST(names_change_only_in_images_ghc_made) {
  const std::vector<procmaps::Line> no_lines;
  // C: left alone, whatever its names look like.
  signed char made = -1;
  auto c = frames({"X509_get_info", "Main_main_info"});
  symbolize::ghc::name_frames(module("/usr/lib/x86_64-linux-gnu/libcrypto.so.3", {"X509_get_info"}), no_lines,
                              nullptr, &made, &c);
  CHECK_EQ(made, static_cast<signed char>(0));
  CHECK_EQ(c[0].name, std::string("X509_get_info"));
  CHECK_EQ(c[1].name, std::string("Main_main_info"));
  // GHC's: its symbols renamed, the RTS's left; the symbol stays the system name.
  made = -1;
  auto hs = frames({"Main_zdwfib_info", "stg_upd_frame_info", "evacuate"});
  symbolize::ghc::name_frames(module("/tmp/prog", {"hs_init_ghc"}), no_lines, nullptr, &made, &hs);
  CHECK_EQ(made, static_cast<signed char>(1));
  CHECK_EQ(hs[0].name, std::string("Main.$wfib"));
  CHECK_EQ(hs[0].system_name, std::string("Main_zdwfib_info"));
  CHECK_EQ(hs[1].name, std::string("stg_upd_frame_info"));
  CHECK_EQ(hs[2].name, std::string("evacuate"));
  // Decided once: the module's symbols are not looked at again.
  made = 0;
  auto again = frames({"Main_zdwfib_info"});
  symbolize::ghc::name_frames(module("/tmp/prog", {"hs_init_ghc"}), no_lines, nullptr, &made, &again);
  CHECK_EQ(again[0].name, std::string("Main_zdwfib_info"));
}
