// symbolize_ghc: the names of code compiled by GHC (Haskell), spelled as a
// Haskell programmer writes them. GHC's symbols are Z-encoded and carry
// the kind of label they are ("base_GHCziBase_zpzp_info"); a profile shows
// "base:GHC.Base.++". Applied only to images GHC made: the same rule would
// read a C function "X509_get_info" as "X509.get".
#pragma once
#include <string>
#include <vector>

#include "pprof.h"
#include "symbolize_internal.h"

namespace symbolize {
namespace ghc {

// One Z-encoded piece (a unit, a module or a name) decoded ("GHCziBase" ->
// "GHC.Base", "zdwfib" -> "$wfib", "Z3T" -> "(,,)"); false when it is not
// well-formed Z-encoding (an unknown escape, a character GHC would have
// encoded).
bool z_decode(const std::string& z, std::string* out);

// The function a GHC symbol labels, as "unit:Module.name"
// ("ghczmprim_GHCziClasses_zeze_info" -> "ghc-prim:GHC.Classes.=="), or
// "Module.name" for the main unit's code, which GHC gives no unit
// ("Main_zdwfib_info" -> "Main.$wfib"); false for anything else (the RTS's
// stg_* and C functions, local labels such as "s1a2_info").
bool function_name(const char* sym, std::string* out);

// Whether GHC made the module: it is a Haskell library (libHS*.so, by
// file name or soname), or needs one (a Haskell program linked
// dynamically), or holds the RTS (hs_init_ghc: one linked statically). dyn is
// its dynamic section, null if it has none; its symbols are loaded.
bool compiled_by_ghc(const internal::ModInfo& mi, const internal::Dynamic* dyn);

// If GHC made module mi, each of frames whose system name is a GHC symbol
// gets its Haskell name. *made is whether it did (-1: not yet known, then
// decided here from mi's symbols, which are loaded, and its dynamic
// section in lines: head is its line at file offset 0, or null).
void name_frames(const internal::ModInfo& mi, const std::vector<procmaps::Line>& lines,
                 const procmaps::Line* head, signed char* made, std::vector<pprof::Frame>* frames);

}  // namespace ghc
}  // namespace symbolize
