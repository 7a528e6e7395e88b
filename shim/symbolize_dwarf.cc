// symbolize_dwarf: the frames of one address inside one module — its function
// from the ELF symbol table, then file, line and inlined calls from DWARF —
// reading only the compile unit that holds the address and, within it, only
// the function that holds it. The walk of a unit also records the scopes
// symbolize_names.cc qualifies names with.
#include <gelf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "symbolize_internal.h"

namespace symbolize {
namespace internal {

namespace {

// --- ELF function symbols -------------------------------------------------------

// Lower is the better of several names for one address: "malloc" before
// "__libc_malloc", then global before weak before local, then shorter.
int symbol_rank(const char* name, unsigned binding) {
  int underscores = 0;
  while (name[underscores] == '_' && underscores < 7) ++underscores;
  int b = binding == STB_GLOBAL ? 0 : binding == STB_WEAK ? 1 : 2;
  size_t len = std::strcspn(name, "@");
  return underscores << 24 | b << 20 | static_cast<int>(std::min<size_t>(len, 0xfffff));
}

// Every sized function symbol, sorted, built once for each module that holds
// a sampled address; lookups are then binary searches (libdwfl's own
// dwfl_module_addrinfo scans the whole table on every call). Symbols without
// a size are left out: on a stripped binary they would name the code of
// unexported functions after whichever exported one precedes them.
void load_symbols(Dwfl_Module* mod, ModInfo* mi) {
  mi->syms_loaded = true;
  int n = dw().dwfl_module_getsymtab(mod);
  Elf* from[2] = {nullptr, nullptr};  // the symbol table's file; a second: .gnu_debugdata's
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr;
    GElf_Word shndx;
    Elf* elf;
    Dwarf_Addr bias;
    const char* name = dw().dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, &elf, &bias);
    if (elf && elf != from[0] && elf != from[1]) from[from[0] ? 1 : 0] = elf;
    if (!name || !*name || GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0 ||
        shndx == SHN_UNDEF)
      continue;
    mi->syms.push_back({addr, addr + sym.st_size, name, symbol_rank(name, GELF_ST_BIND(sym.st_info))});
  }
  std::sort(mi->syms.begin(), mi->syms.end(), [](const FuncSym& a, const FuncSym& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.rank != b.rank) return a.rank < b.rank;
    return std::strcmp(a.name, b.name) < 0;
  });
  mi->syms.erase(std::unique(mi->syms.begin(), mi->syms.end(),
                             [](const FuncSym& a, const FuncSym& b) { return a.start == b.start; }),
                 mi->syms.end());
  own_symbol_names(mi);
  for (Elf* e : from) drop_symbol_pages(e);
}

// A .symtab name may carry its symbol version ("realpath@@GLIBC_2.3"); that
// is not part of the function's name, and it would defeat demangling.
void name_from_symbol(const FuncSym& s, Names* names, pprof::Frame* f) {
  f->system_name.assign(s.name, std::strcspn(s.name, "@"));
  f->name = names->demangle(f->system_name.c_str());
}

}  // namespace

const FuncSym* find_symbol(const std::vector<FuncSym>& syms, uint64_t pc) {
  auto it = std::upper_bound(syms.begin(), syms.end(), pc,
                             [](uint64_t v, const FuncSym& s) { return v < s.start; });
  for (int k = 0; k < 8 && it != syms.begin(); ++k) {  // symbols can nest (assembly)
    --it;
    if (pc < it->end) return &*it;
  }
  return nullptr;
}

namespace {

// --- DWARF ranges -----------------------------------------------------------------

void add_ranges(Dwarf_Die* die, std::vector<PcRange>* out) {
  Dwarf_Addr base, lo, hi;
  ptrdiff_t off = 0;
  while ((off = dw().dwarf_ranges(die, off, &base, &lo, &hi)) > 0)
    if (hi > lo) out->push_back({lo, hi, *die});
}

void sort_ranges(std::vector<PcRange>* v) {
  std::sort(v->begin(), v->end(), [](const PcRange& a, const PcRange& b) { return a.lo < b.lo; });
}

// The range holding pc; like symbols, ranges can nest, so look a little
// further back than the nearest start.
const PcRange* find_range(const std::vector<PcRange>& v, uint64_t pc) {
  auto it = std::upper_bound(v.begin(), v.end(), pc, [](uint64_t x, const PcRange& r) { return x < r.lo; });
  for (int k = 0; k < 8 && it != v.begin(); ++k) {
    --it;
    if (pc < it->hi) return &*it;
  }
  return nullptr;
}

bool load_dwarf(Dwfl_Module* mod, DwarfState* st) {
  if (!st->tried) {
    st->tried = true;
    st->dw = dw().dwfl_module_getdwarf(mod, &st->bias);
  }
  return st->dw != nullptr;
}

// The CUs' own ranges, read once per module: one DIE per CU, not their contents.
// Units .debug_aranges covers are left out: they said the address is not
// theirs (an address in a PLT stub of libc would otherwise read all 4,126
// units' DIEs and abbreviations, +4 MiB). Pages are dropped behind the
// walk, as the aranges' lookup does.
void index_cus(DwarfState* st) {
  st->cus_indexed = true;
  if (!st->walk.started) read_units(st);
  const std::vector<uint64_t>& aranged = st->aranged_units;
  Dwarf_Off off = 0, next, slice = 0;
  size_t header;
  while (dw().dwarf_nextcu(st->dw, off, &next, &header, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die cu;
    if (!std::binary_search(aranged.begin(), aranged.end(), off) &&
        dw().dwarf_offdie(st->dw, off + header, &cu)) {
      add_ranges(&cu, &st->cus);
      st->walk.next = std::max<uint64_t>(st->walk.next, next);
    }
    if (off >= slice + UnitWalk::kSlice) {
      st->walk.drop(slice, off);
      slice = off;
    }
    off = next;
  }
  st->walk.drop(slice, off);
  sort_ranges(&st->cus);
}

// The CU holding pc: from .debug_aranges when they answer (read here, not
// by libdwfl, whose reading makes all of .debug_info resident:
// symbolize_units.cc), else from the CUs' ranges (clang emits no
// .debug_aranges by default, and libdw 0.188 does not make them up;
// assembly CUs often lack them too).
bool find_cu(Dwfl_Module* mod, DwarfState* st, uint64_t pc, Dwarf_Die* cu) {
  if (!load_dwarf(mod, st)) return false;
  bool known = false;
  if (unit_by_aranges(st, pc - st->bias, cu, &known)) return true;
  Dwarf_Addr bias = 0;
  if (!known)
    if (Dwarf_Die* d = dw().dwfl_module_addrdie(mod, pc, &bias)) {
      *cu = *d;
      return true;
    }
  if (!st->cus_indexed) index_cus(st);
  const PcRange* r = find_range(st->cus, pc - st->bias);
  if (r) *cu = r->die;
  return r != nullptr;
}

void note_outline(Dwarf_Die* fn, DwarfState* st) {
  Dwarf_Addr entry;
  if (!dw().dwarf_hasattr(fn, DW_AT_abstract_origin) || dw().dwarf_entrypc(fn, &entry) != 0) return;
  st->outline_entry.emplace(root_origin(fn).addr, entry);
}

struct Walk {
  DwarfState* st;
  std::vector<PcRange>* funcs;  // the shallow walk's: out-of-line functions
  bool bodies;                  // the deep walk: functions' bodies, and only what lies in them
  bool scopes;                  // record scopes (C++ names need them; C's do not)
};

void walk(const Walk& w, Dwarf_Die* parent, const Dwarf_Die& scope, bool in_fn, int depth) {
  Dwarf_Die c;
  if (depth > 48 || dw().dwarf_child(parent, &c) != 0) return;
  const bool record = w.scopes && (!w.bodies || in_fn);
  do {
    const int tag = dw().dwarf_tag(&c);
    if (tag == DW_TAG_subprogram) {
      if (record) w.st->scope_of.emplace(c.addr, scope);
      if (!in_fn && w.funcs) {
        add_ranges(&c, w.funcs);
        if (w.scopes) note_outline(&c, w.st);
      }
      if (w.bodies) walk(w, &c, c, true, depth + 1);
    } else if (tag == DW_TAG_namespace || tag == DW_TAG_module || is_type(tag)) {
      if (record) {
        w.st->scope_of.emplace(c.addr, scope);
        if (is_type(tag) && !dw().dwarf_hasattr(&c, DW_AT_name)) w.st->unnamed_in[scope.addr].push_back(c);
      }
      if (tag != DW_TAG_enumeration_type) walk(w, &c, c, in_fn, depth + 1);
    } else if (tag == DW_TAG_lexical_block && in_fn) {
      walk(w, &c, scope, true, depth + 1);
    } else if (tag == DW_TAG_typedef && record) {
      // typedef struct {...} T: T is the type's name in C++ signatures.
      Dwarf_Attribute a;
      Dwarf_Die target;
      if (dw().dwarf_formref_die(dw().dwarf_attr(&c, DW_AT_type, &a), &target) &&
          is_type(dw().dwarf_tag(&target)) && !dw().dwarf_hasattr(&target, DW_AT_name))
        w.st->scope_of.emplace(c.addr, scope);
    }
  } while (dw().dwarf_siblingof(&c, &c) == 0);
}

}  // namespace

void walk_unit(Dwarf_Die* cu, bool bodies, DwarfState* st, std::vector<PcRange>* funcs) {
  walk(Walk{st, funcs, bodies, is_cxx_unit(cu)}, cu, *cu, false, 0);
}

const std::vector<PcRange>& cu_functions(DwarfState* st, Dwarf_Die* cu) {
  const void* key = cu->addr;
  auto it = st->funcs.find(key);
  if (it != st->funcs.end()) return it->second;
  std::vector<PcRange> v;
  walk_unit(cu, false, st, &v);
  sort_ranges(&v);
  return st->funcs.emplace(key, std::move(v)).first->second;
}

namespace {

// --- the inline chain -------------------------------------------------------------

bool may_hold_code(int tag) {
  return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
         tag == DW_TAG_try_block || tag == DW_TAG_catch_block || tag == DW_TAG_with_stmt ||
         tag == DW_TAG_subprogram;
}

// [function, inlined call, inlined call, ...]: the DIEs holding pc from the
// out-of-line function down to the innermost inlined call. (dwarf_getscopes
// does not give this: past the innermost inlined call it returns the scopes
// of the inlined function's definition, not of its callers.) Lexical blocks
// are walked through, not kept; they are not frames.
void inline_chain(const Dwarf_Die& fn, Dwarf_Addr pc, std::vector<Dwarf_Die>* chain) {
  chain->assign(1, fn);
  Dwarf_Die cur = fn;
  for (int depth = 0; depth < 64; ++depth) {
    Dwarf_Die c;
    bool found = false;
    if (dw().dwarf_child(&cur, &c) != 0) return;
    do {
      int tag = dw().dwarf_tag(&c);
      if (!may_hold_code(tag) || dw().dwarf_haspc(&c, pc) != 1) continue;
      if (tag == DW_TAG_inlined_subroutine) chain->push_back(c);
      if (tag == DW_TAG_subprogram) chain->assign(1, c);  // a nested function
      cur = c;
      found = true;
    } while (!found && dw().dwarf_siblingof(&c, &c) == 0);
    if (!found) return;
  }
}

// --- frames -----------------------------------------------------------------------

// The line table's names are relative to the unit's compilation directory
// when the compiler was given a relative path ("./ha.h", "src/x.c"): made
// absolute here, or `pprof -list` looks for them in its own directory.
std::string source_file(const char* s, Dwarf_Die* cu) {
  Dwarf_Attribute a;
  const char* dir = s[0] == '/' ? nullptr : dw().dwarf_formstring(dw().dwarf_attr(cu, DW_AT_comp_dir, &a));
  return join_path(dir ? dir : "", s);
}

// The unit's rows for pc (a DWARF address) read here (symbolize_lines.cc)
// for every address of the batch in this module; null where libdw is to
// read the unit's lines.
const UnitLines* unit_lines(ModInfo* mi, Dwarf_Die* cu, Dwarf_Addr pc, const std::vector<uint64_t>& batch) {
  UnitLines* ul = &mi->dwarf.lines;
  if (ul->unit != cu->addr || !std::binary_search(ul->pcs.begin(), ul->pcs.end(), pc)) {
    std::vector<uint64_t> pcs;
    const uint64_t bias = mi->dwarf.bias;
    // From pc on: the lookup goes up, the addresses below pc are named.
    for (auto it = std::lower_bound(batch.begin(), batch.end(), std::max(mi->low, pc + bias));
         it != batch.end() && *it < mi->high; ++it)
      pcs.push_back(*it - bias);
    if (!std::binary_search(pcs.begin(), pcs.end(), pc)) pcs.insert(std::lower_bound(pcs.begin(), pcs.end(), pc), pc);
    read_unit_lines(mi->dwarf.dw, cu, std::move(pcs), ul);
  }
  return ul->ok ? ul : nullptr;
}

void line_from_table(Dwarf_Die* cu, Dwarf_Addr pc, const UnitLines* ul, pprof::Frame* f) {
  if (ul) {
    const LineRow& row = ul->rows[std::lower_bound(ul->pcs.begin(), ul->pcs.end(), pc) - ul->pcs.begin()];
    if (!row.found) return;
    if (row.line > 0 && row.line <= INT32_MAX) f->line = row.line;
    if (row.file < ul->files.size()) f->file = source_file(ul->files[row.file].c_str(), cu);
    return;
  }
  Dwarf_Line* l = dw().dwarf_getsrc_die(cu, pc);
  if (!l) return;
  int line = 0;
  if (dw().dwarf_lineno(l, &line) == 0 && line > 0) f->line = line;
  if (const char* s = dw().dwarf_linesrc(l, nullptr, nullptr)) f->file = source_file(s, cu);
}

// Where the inlined call `inlined` was made, in the function that holds it.
void line_from_call_site(Dwarf_Die* inlined, Dwarf_Die* cu, const UnitLines* ul, Dwarf_Files* files,
                         size_t nfiles, pprof::Frame* f) {
  Dwarf_Attribute a;
  Dwarf_Word v;
  if (dw().dwarf_formudata(dw().dwarf_attr(inlined, DW_AT_call_line, &a), &v) == 0) f->line = v;
  if (dw().dwarf_formudata(dw().dwarf_attr(inlined, DW_AT_call_file, &a), &v) != 0) return;
  if (ul) {
    if (v < ul->files.size()) f->file = source_file(ul->files[v].c_str(), cu);
  } else if (files && v < nfiles) {
    if (const char* s = dw().dwarf_filesrc(files, v, nullptr, nullptr)) f->file = source_file(s, cu);
  }
}

// Frames innermost first: the innermost gets the line table's line, each
// outer one the call site of the inlined call inside it. The outermost is
// named by its ELF symbol when there is one, as a profile of a binary
// without DWARF would name it.
void frames_from_chain(std::vector<Dwarf_Die>* chain, Dwarf_Die* cu, Dwarf_Addr pc, const FuncSym* sym,
                       ModInfo* mi, const UnitLines* ul, Names* names, std::vector<pprof::Frame>* out) {
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  if (!ul && chain->size() > 1 && dw().dwarf_getsrcfiles(cu, &files, &nfiles) != 0) files = nullptr;
  for (size_t i = chain->size(); i-- > 0;) {
    pprof::Frame f;
    Dwarf_Die* die = &(*chain)[i];
    if (i == 0 && sym)
      name_from_symbol(*sym, names, &f);
    else
      name_from_die(die, mi, names, &f);
    int decl = 0;
    if (dw().dwarf_decl_line(die, &decl) == 0 && decl > 0) f.start_line = decl;
    if (i + 1 == chain->size())
      line_from_table(cu, pc, ul, &f);
    else
      line_from_call_site(&(*chain)[i + 1], cu, ul, files, nfiles, &f);
    out->push_back(std::move(f));
  }
}

}  // namespace

std::string join_path(const std::string& dir, const std::string& file) {
  const std::string whole = file.empty() || file[0] == '/' || dir.empty() ? file : dir + "/" + file;
  std::string out;
  size_t i = 0;
  while (i < whole.size()) {
    size_t j = whole.find('/', i);
    if (j == std::string::npos) j = whole.size();
    const std::string part = whole.substr(i, j - i);
    if (!part.empty() && part != ".") out += (out.empty() && whole[0] != '/' ? "" : "/") + part;
    i = j + 1;
  }
  return out.empty() && !whole.empty() && whole[0] == '/' ? "/" : out;
}

bool module_frames(Dwfl_Module* mod, ModInfo* mi, uint64_t pc, const std::vector<uint64_t>& batch,
                   Names* names, std::vector<pprof::Frame>* out) {
  if (!mi->syms_loaded) load_symbols(mod, mi);
  const FuncSym* sym = find_symbol(mi->syms, pc);
  Dwarf_Die cu;
  std::vector<Dwarf_Die> chain;
  const bool have_cu = find_cu(mod, &mi->dwarf, pc, &cu);
  if (have_cu) mi->dwarf.walk.enter_unit(cu.addr);
  const Dwarf_Addr dpc = pc - mi->dwarf.bias;
  if (have_cu)
    if (const PcRange* fn = find_range(cu_functions(&mi->dwarf, &cu), dpc)) inline_chain(fn->die, dpc, &chain);
  if (!chain.empty()) {
    frames_from_chain(&chain, &cu, dpc, sym, mi, unit_lines(mi, &cu, dpc, batch), names, out);
    return true;
  }
  if (!sym) return false;  // a line without a function name is not worth a frame
  out->emplace_back();
  name_from_symbol(*sym, names, &out->back());
  if (have_cu) line_from_table(&cu, dpc, unit_lines(mi, &cu, dpc, batch), &out->back());  // e.g. assembly: lines, no DIEs
  return false;
}

void symbol_frames(ModInfo* mi, uint64_t pc, Names* names, std::vector<pprof::Frame>* out) {
  if (const FuncSym* sym = find_symbol(mi->syms, pc)) {
    out->emplace_back();
    name_from_symbol(*sym, names, &out->back());
  }
}

}  // namespace internal
}  // namespace symbolize
