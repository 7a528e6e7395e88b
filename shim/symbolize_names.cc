// symbolize_names: the name of a function known from DWARF — an inlined call,
// or code without a symbol — made to be the name its symbol has or would
// have, so that one function has one name whether it was inlined or not, and
// two functions (two lambdas) never share one. In order:
//   1. DW_AT_linkage_name (through DW_AT_abstract_origin and
//      DW_AT_specification), demangled;
//   2. a C (or other non-C++) unit's DW_AT_name: that is the symbol;
//   3. the ELF symbol of the function's out-of-line copy, if the compiler
//      made one (GCC gives C++ functions of internal linkage — statics,
//      lambdas, anonymous namespaces — no linkage name);
//   4. for an external function still without one, extern "C" or main: its
//      DW_AT_name, which is its symbol;
//   5. the demangler's spelling rebuilt from DWARF: scopes, lambda closure
//      numbers, parameter types (symbolize_types.cc), const; without the
//      parameters if a type cannot be spelled.
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "symbolize_namer.h"
#include "symbolize_rust.h"

namespace symbolize {
namespace internal {

namespace {

// The suffixes GCC and LLVM give a function's clones and split parts.
const char* const kCloneTags[] = {"constprop", "isra", "part", "cold", "lto_priv", "localalias",
                                  "llvm", "__uniq", "clone", "specialized"};

// A C name's ".constprop.0"; the demangler spells a C++ one " [clone .constprop.0]".
void drop_clone_suffix(std::string* s, bool demangled) {
  if (demangled) {
    size_t k = s->find(" [clone .");
    if (k != std::string::npos) s->resize(k);
    return;
  }
  for (size_t dot = s->find('.', 1); dot != std::string::npos; dot = s->find('.', dot + 1))
    for (const char* tag : kCloneTags)
      if (s->compare(dot + 1, std::strlen(tag), tag) == 0) return s->resize(dot);
}

}  // namespace

const std::string& Names::demangle(const char* sys) {
  auto it = cache_.find(sys);
  if (it != cache_.end()) return it->second;
  std::string out = sys;
  bool demangled = false;
  // Rust's first: its legacy names are C++'s form, which the C++ demangler
  // would spell with their hash and escapes left in.
  if (rust_name(sys, &out)) return cache_.emplace(sys, std::move(out)).first->second;
  if (sys[0] == '_' && sys[1] == 'Z') {
    int status = 0;
    char* d = abi::__cxa_demangle(sys, nullptr, nullptr, &status);
    if (d && status == 0) out = d, demangled = true;
    std::free(d);
  }
  drop_clone_suffix(&out, demangled);
  // Go's linker names an assembly function's symbol "pkg.fn.abi0" (its
  // DWARF says "pkg.fn"): Go's own tools and pprof print "pkg.fn", and so
  // one function has one name whichever table named it.
  for (const char* abi : {".abi0", ".abiinternal"}) {
    size_t n = std::strlen(abi);
    if (!demangled && out.size() > n && out.compare(out.size() - n, n, abi) == 0) out.resize(out.size() - n);
  }
  return cache_.emplace(sys, std::move(out)).first->second;
}

bool is_type(int tag) {
  return tag == DW_TAG_class_type || tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
         tag == DW_TAG_enumeration_type;
}

// DW_LANG_C_plus_plus_17 and _20 (0x2a, 0x2b) are newer than elfutils 0.188's dwarf.h.
bool is_cxx_unit(Dwarf_Die* cu) {
  const int lang = dw().dwarf_srclang(cu);
  return lang == DW_LANG_C_plus_plus || lang == DW_LANG_C_plus_plus_03 ||
         lang == DW_LANG_C_plus_plus_11 || lang == DW_LANG_C_plus_plus_14 || lang == 0x2a ||
         lang == 0x2b;
}

Dwarf_Die root_origin(Dwarf_Die* die) {
  Dwarf_Die cur = *die, next;
  for (int hops = 0; hops < 8 && ref(&cur, DW_AT_abstract_origin, &next); ++hops) cur = next;
  return cur;
}

namespace {

// The DIE that carries die's DW_AT_name, through DW_AT_abstract_origin and
// DW_AT_specification: its scope is what qualifies the name.
bool named_die(Dwarf_Die* die, Dwarf_Die* out) {
  *out = *die;
  for (int hops = 0; hops < 8; ++hops) {
    if (dw().dwarf_hasattr(out, DW_AT_name)) return true;
    if (!ref(out, DW_AT_abstract_origin, out) && !ref(out, DW_AT_specification, out)) return false;
  }
  return false;
}

}  // namespace

// Walks die's unit, then its unit's bodies, the first time it is asked for.
bool Namer::scope(Dwarf_Die* die, Dwarf_Die* out) {
  for (int pass = 0; pass < 3; ++pass) {
    auto it = st().scope_of.find(die->addr);
    if (it != st().scope_of.end()) return *out = it->second, true;
    Dwarf_Die cu;
    if (!dw().dwarf_diecu(die, &cu, nullptr, nullptr)) return false;
    if (pass == 0) cu_functions(&st(), &cu);
    if (pass == 1 && st().bodies_walked.insert(cu.addr).second) walk_unit(&cu, true, &st(), nullptr);
  }
  return false;
}


bool Namer::prefix(Dwarf_Die* die, std::string* out) {
  Dwarf_Die s;
  Deeper guard(this);
  out->clear();
  if (guard.too_deep()) return false;
  if (!scope(die, &s)) return true;
  const int tag = dw().dwarf_tag(&s);
  bool ok = true;
  if (tag == DW_TAG_namespace || tag == DW_TAG_module) {
    ok = prefix(&s, out);
    const char* n = name_of(&s);
    *out += n ? n : "(anonymous namespace)";
  } else if (is_type(tag)) {
    ok = type_name(&s, out);
  } else if (tag == DW_TAG_subprogram) {
    const auto& fn = function(&s);
    ok = !fn.first.empty();
    *out = fn.first;
  } else {
    out->clear();
  }
  if (!out->empty()) *out += "::";
  return ok;
}


bool Namer::type_name(Dwarf_Die* t, std::string* out) {
  auto cached = st().type_names.find(t->addr);
  if (cached != st().type_names.end()) return *out = cached->second, true;
  if (!prefix(t, out)) return false;
  if (const char* n = name_of(t)) {
    std::string spelled = with_template_args(t, n);
    Dwarf_Die def;
    if (spelled == n && std::strchr(n, '<') && definition(t, &def)) spelled = with_template_args(&def, n);
    *out += spelled;
    st().type_names.emplace(t->addr, *out);
    return true;
  }
  Dwarf_Die s;
  if (!scope(t, &s)) return false;
  std::string sig;
  bool spelled = true;
  const bool closure = closure_sig(t, &sig, &spelled);
  if (!spelled) return false;
  const bool per_sig = closure && per_signature_lambdas(t);
  int n = 1;
  for (Dwarf_Die& u : st().unnamed_in[s.addr]) {
    if (u.addr == t->addr) break;
    std::string other;
    bool ok = true;
    if (closure_sig(&u, &other, &ok) == closure && (!per_sig || other == sig)) ++n;
  }
  *out += (closure ? "{lambda(" + sig + ")#" : std::string("{unnamed type#")) + std::to_string(n) + "}";
  st().type_names.emplace(t->addr, *out);
  return true;
}


// A lambda's closure type (GCC: an unnamed class whose constructors are
// "<lambda>", or whose operator() is artificial) and its parameter list;
// *spelled false if a parameter's type could not be spelled.
// A declaration of a class template instance (GCC gives it no template
// parameters) -> its definition, among its scope's children.
bool Namer::definition(Dwarf_Die* decl, Dwarf_Die* def) {
  Dwarf_Die s;
  const char* n = name_of(decl);
  if (!n || !dw().dwarf_hasattr(decl, DW_AT_declaration) || !scope(decl, &s) || dw().dwarf_child(&s, def) != 0)
    return false;
  const int tag = dw().dwarf_tag(decl);
  do {
    const char* m = name_of(def);
    if (dw().dwarf_tag(def) == tag && m && std::strcmp(m, n) == 0 && !dw().dwarf_hasattr(def, DW_AT_declaration))
      return true;
  } while (dw().dwarf_siblingof(def, def) == 0);
  return false;
}

bool Namer::closure_sig(Dwarf_Die* t, std::string* sig, bool* spelled) {
  Dwarf_Die c;
  bool closure = false;
  Dwarf_Die call;
  bool have_call = false;
  if (name_of(t) || dw().dwarf_child(t, &c) != 0) return false;
  do {
    if (dw().dwarf_tag(&c) != DW_TAG_subprogram) continue;
    const char* n = name_of(&c);
    if (!n) continue;
    if (std::strcmp(n, "<lambda>") == 0) closure = true;
    if (std::strncmp(n, "operator()", 10) == 0) {
      call = c, have_call = true;
      if (dw().dwarf_hasattr(&c, DW_AT_artificial)) closure = true;
    }
  } while (dw().dwarf_siblingof(&c, &c) == 0);
  sig->clear();
  bool is_const = false;
  if (closure && have_call && !params(&call, sig, &is_const)) *spelled = false;
  return closure;
}


// GCC numbers a scope's lambdas one after another up to GCC 12, and per
// signature (as the ABI says, and clang does) from GCC 13 on (ABI 18).
bool Namer::per_signature_lambdas(Dwarf_Die* die) {
  Dwarf_Die cu;
  Dwarf_Attribute a;
  const char* p = dw().dwarf_diecu(die, &cu, nullptr, nullptr)
                      ? dw().dwarf_formstring(dw().dwarf_attr(&cu, DW_AT_producer, &a))
                      : nullptr;
  if (!p || std::strncmp(p, "GNU ", 4) != 0) return true;
  const char* v = std::strchr(p + 4, ' ');
  if (!v || std::atoi(v + 1) < 13) return false;
  const char* abi = std::strstr(p, "-fabi-version=");
  return !abi || std::atoi(abi + 14) == 0 || std::atoi(abi + 14) >= 18;
}


// Rule 5: "ns::f(int, long)", "f()::{lambda(int)#2}::operator()(int) const".
std::string Namer::from_dwarf(Dwarf_Die* origin) {
  Dwarf_Die named;
  if (!named_die(origin, &named)) return "";
  std::string base = name_of(&named), out, args;
  if (!prefix(&named, &out)) out.clear();
  std::string spelled = with_template_args(origin, base.c_str());
  out += spelled != base ? spelled : with_template_args(&named, base.c_str());
  bool is_const = false;
  Dwarf_Die c;
  Dwarf_Die* with_params = dw().dwarf_child(origin, &c) == 0 ? origin : &named;
  if (!params(with_params, &args, &is_const)) return out;
  std::string ret = "void";
  Dwarf_Die rt;
  if (base.find('<') != std::string::npos && base.compare(0, 8, "operator") != 0) {
    if (ref(&named, DW_AT_type, &rt) && !type(&rt, "", &ret)) return out;
    out = ret + " " + out;
  }
  return out + "(" + args + ")" + (is_const ? " const" : "");
}


const std::pair<std::string, std::string>& Namer::function(Dwarf_Die* die) {
  Dwarf_Die origin = root_origin(die);
  auto it = st().names.find(origin.addr);
  if (it != st().names.end()) return it->second;
  std::pair<std::string, std::string> r;
  Dwarf_Attribute a;
  Dwarf_Die cu, named;
  const char* s = nullptr;
  if (dw().dwarf_attr_integrate(&origin, DW_AT_linkage_name, &a) ||
      dw().dwarf_attr_integrate(&origin, DW_AT_MIPS_linkage_name, &a))
    s = dw().dwarf_formstring(&a);
  const bool cxx = dw().dwarf_diecu(&origin, &cu, nullptr, nullptr) && is_cxx_unit(&cu);
  const FuncSym* sym = s || !cxx ? nullptr : outline_symbol(&origin);
  if (s) {
    r = {names->demangle(s), s};
  } else if (sym) {
    r.second.assign(sym->name, std::strcspn(sym->name, "@"));
    r.first = names->demangle(r.second.c_str());
  } else if (!cxx || dw().dwarf_attr_integrate(&origin, DW_AT_external, &a)) {
    // C, or external without a linkage name (extern "C", main): the
    // symbol is the plain name.
    if ((s = named_die(&origin, &named) ? name_of(&named) : nullptr)) r = {s, s};
  } else {
    r.first = r.second = from_dwarf(&origin);
  }
  if (r.first.empty()) r = {"??", "??"};
  return st().names.emplace(origin.addr, std::move(r)).first->second;
}


// Rule 3: the symbol that starts at the entry of the function's
// out-of-line copy (or of origin itself, when it is that code).
const FuncSym* Namer::outline_symbol(Dwarf_Die* origin) {
  Dwarf_Addr entry;
  Dwarf_Die cu;
  if (dw().dwarf_entrypc(origin, &entry) != 0) {
    if (dw().dwarf_diecu(origin, &cu, nullptr, nullptr)) cu_functions(&st(), &cu);
    auto it = st().outline_entry.find(origin->addr);
    if (it == st().outline_entry.end()) return nullptr;
    entry = it->second;
  }
  const FuncSym* sym = find_symbol(mi->syms, entry + st().bias);
  return sym && sym->start == entry + st().bias ? sym : nullptr;
}

void name_from_die(Dwarf_Die* die, ModInfo* mi, Names* names, pprof::Frame* f) {
  Namer n{mi, names};
  const auto& r = n.function(die);
  f->name = r.first;
  f->system_name = r.second;
}

}  // namespace internal
}  // namespace symbolize
