// symbolize_namer: what symbolize_names.cc (the naming rules, scopes,
// lambdas) and symbolize_types.cc (types and template arguments as the
// demangler spells them) share to rebuild a C++ name from DWARF.
#pragma once
#include <string>
#include <utility>

#include "symbolize_internal.h"

namespace symbolize {
namespace internal {

inline bool ref(Dwarf_Die* die, int attr, Dwarf_Die* out) {
  Dwarf_Attribute a;
  return dw().dwarf_attr(die, attr, &a) && dw().dwarf_formref_die(&a, out);
}

inline const char* name_of(Dwarf_Die* die) { return dw().dwarf_diename(die); }

// Names one module's functions; its caches live in the module's DwarfState.
struct Namer {
  ModInfo* mi;
  Names* names;
  int depth = 0;  // of scopes and types being spelled: DWARF can loop

  struct Deeper {
    Namer* n;
    explicit Deeper(Namer* namer) : n(namer) { ++n->depth; }
    ~Deeper() { --n->depth; }
    bool too_deep() const { return n->depth > 48; }
  };

  DwarfState& st() { return mi->dwarf; }

  // --- symbolize_names.cc ---
  // The name and system name of the function an inlined call or out-of-line
  // DIE belongs to; cached by its abstract DIE.
  const std::pair<std::string, std::string>& function(Dwarf_Die* die);
  // The scope recorded for die (its unit is walked on first need).
  bool scope(Dwarf_Die* die, Dwarf_Die* out);
  // "ns::Class::", "f(int)::{lambda(int)#1}::", or "" at unit level.
  bool prefix(Dwarf_Die* die, std::string* out);
  // A class, struct, union or enum, qualified; "{lambda(int)#2}" and
  // "{unnamed type#1}" for unnamed ones.
  bool type_name(Dwarf_Die* t, std::string* out);

  // --- symbolize_types.cc ---
  // A type as the demangler spells it; decl is what stands to its right
  // ("*", " const*", "&").
  bool type(Dwarf_Die* t, const std::string& decl, std::string* out);
  // "int, char const*" (the parentheses' contents); *is_const for a const
  // member function.
  bool params(Dwarf_Die* fn, std::string* out, bool* is_const);
  // name ("vector<long unsigned int>" as GCC spells it) with its template
  // arguments spelled from die's template parameters ("vector<unsigned long>");
  // name itself where they cannot be.
  std::string with_template_args(Dwarf_Die* die, const char* name);

 private:
  bool definition(Dwarf_Die* decl, Dwarf_Die* def);
  bool closure_sig(Dwarf_Die* t, std::string* sig, bool* spelled);
  bool per_signature_lambdas(Dwarf_Die* die);
  std::string from_dwarf(Dwarf_Die* origin);
  const FuncSym* outline_symbol(Dwarf_Die* origin);
  bool template_value(Dwarf_Die* param, std::string* out);
};

}  // namespace internal
}  // namespace symbolize
