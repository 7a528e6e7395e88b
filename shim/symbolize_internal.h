// symbolize_internal: what the symbolizer's files share — the table of libdw
// functions resolved with dlsym (the shim never links -ldw), the per-module
// state a Session builds lazily, and each file's entry points.
#pragma once
#include <dwarf.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "pprof.h"
#include "procmaps.h"
#include "symbolize_cache.h"

namespace symbolize {
namespace internal {

// Every libdw / libdwfl / libelf function the symbolizer calls. libelf's come
// through libdw's handle: dlsym searches a handle's dependencies too.
#define PROFSHIM_DW_FUNCTIONS(X)                                                   \
  X(dwfl_begin) X(dwfl_end) X(dwfl_errmsg) X(dwfl_report_begin)                    \
  X(dwfl_report_module) X(dwfl_report_end) X(dwfl_module_info) X(dwfl_addrmodule) \
  X(dwfl_module_build_id) X(dwfl_module_getdwarf) X(dwfl_module_addrdie)           \
  X(dwfl_module_getsymtab) X(dwfl_module_getsym_info)                              \
  X(dwfl_build_id_find_debuginfo) X(dwfl_offline_section_address)                  \
  X(dwarf_tag) X(dwarf_child) X(dwarf_siblingof) X(dwarf_haspc) X(dwarf_ranges)    \
  X(dwarf_attr) X(dwarf_attr_integrate) X(dwarf_formref_die) X(dwarf_diename) X(dwarf_formstring) X(dwarf_formudata)     \
  X(dwarf_decl_line) X(dwarf_offdie) X(dwarf_nextcu)            \
  X(dwarf_getsrc_die) X(dwarf_lineno) X(dwarf_linesrc) X(dwarf_getsrcfiles)        \
  X(dwarf_filesrc) X(dwarf_diecu) X(dwarf_srclang) X(dwarf_entrypc) X(dwarf_hasattr)  \
  X(dwelf_elf_gnu_build_id) X(elf_begin) X(elf_memory) X(elf_end)                \
  X(elf_nextscn) X(gelf_getshdr) X(elf_compress) X(elf_update)                   \
  X(dwarf_getelf) X(elf_getshdrstrndx) X(elf_strptr) X(elf_getdata) X(elf_getident) X(gelf_getehdr) X(elf_getscn)

struct Dw {
#define PROFSHIM_DW_FIELD(f) decltype(&::f) f = nullptr;
  PROFSHIM_DW_FUNCTIONS(PROFSHIM_DW_FIELD)
#undef PROFSHIM_DW_FIELD
};

// The table; every pointer is set once load_libdw() has returned true.
const Dw& dw();

// A [lo, hi) code range (DWARF addresses) and the DIE that owns it.
struct PcRange {
  uint64_t lo, hi;
  Dwarf_Die die;
};

// One unit's address range from .debug_aranges.
struct UnitRange {
  uint64_t lo, hi, cu;  // cu: the unit's offset in .debug_info
  uint64_t reach;       // the highest hi of this range and every one before it (nested ranges)
};

// libdw interning a module's units in order, a slice at a time, the pages
// passed dropped behind it (symbolize_units.cc).
struct UnitWalk {
  bool started = false;
  Dwarf* dbg = nullptr;
  const unsigned char* base = nullptr;  // .debug_info, when its pages may be dropped
  uint64_t size = 0;
  // The debug sections' span in the file's mapping, when its pages may be
  // dropped; span_checked: the mapping is writable, so each drop first
  // checks that no page is a written copy.
  const unsigned char* span = nullptr;
  uint64_t span_size = 0;
  bool span_checked = true;
  const void* last_unit = nullptr;  // the unit the last address was in (enter_unit)
  uint64_t units_left = 0;
  uint64_t next = 0;  // every unit below this offset is interned
  // Small against the section (5.8 MiB for libc6-dbg), large against a page
  // and fault-around's 64 KiB: ~24 madvise calls for libc.
  static constexpr uint64_t kSlice = 256 << 10;
  void begin(Dwarf* dwarf);
  // Drops the pages of [from, to) of .debug_info, whole pages only.
  void drop(uint64_t from, uint64_t to);
  // The lookup goes in address order, so a unit's addresses come together:
  // at every fourth unit it moves on to, the pages the units before read of
  // the debug sections (their DIEs, line programs, ranges) are dropped.
  // Not at every one: the next unit faults back the pages it shares
  // (abbreviations, strings), 1,500 units of a small binary doubled its stop.
  static constexpr uint64_t kUnitsPerDrop = 4;
  void enter_unit(const void* unit);
  // The DIE of the unit at cu_off, interning the units before it.
  bool unit_die(uint64_t cu_off, Dwarf_Die* cu);
};

// One unit's line rows for the addresses a stop asks (symbolize_lines.cc).
struct LineRow {
  uint64_t addr = 0;  // the row's address
  uint32_t file = 0;  // index into UnitLines::files
  int64_t line = 0;
  bool found = false;
};
struct UnitLines {
  const void* unit = nullptr;      // the unit's DIE (Dwarf_Die::addr); null: none read yet
  bool ok = false;                 // false: libdw reads this unit's lines
  std::vector<std::string> files;  // as libdw's dwarf_filesrc names them
  std::vector<uint64_t> pcs;       // DWARF addresses, sorted
  std::vector<LineRow> rows;       // pcs[i]'s
};

// DWARF state of one module, filled on first use. DIEs are keyed by their
// address in the section data (Dwarf_Die::addr), unique across the module's
// debug file and its dwz alt file, where offsets are not.
struct DwarfState {
  bool tried = false;
  Dwarf* dw = nullptr;
  Dwarf_Addr bias = 0;
  bool cus_indexed = false;
  std::vector<PcRange> cus;  // only when .debug_aranges did not answer
  UnitWalk walk;
  bool aranges_read = false;  // .debug_aranges was read here (or there is none)
  std::vector<UnitRange> aranges;
  std::vector<uint64_t> aranged_units;  // sorted: the units .debug_aranges covers
  std::unordered_map<const void*, std::vector<PcRange>> funcs;  // per unit
  // For the units walked: the scope (unit, namespace, type or function) of
  // each namespace, type and function DIE, lexical blocks skipped.
  std::unordered_map<const void*, Dwarf_Die> scope_of;
  // The units whose function bodies were walked too (for their local types).
  std::unordered_set<const void*> bodies_walked;
  // Unnamed types (lambda closures among them) of each scope, in DIE order:
  // their number in that scope is part of their name.
  std::unordered_map<const void*, std::vector<Dwarf_Die>> unnamed_in;
  // An inlined function that also has an out-of-line copy: the abstract
  // DIE -> the copy's entry (DWARF address), whose ELF symbol names it.
  std::unordered_map<const void*, Dwarf_Addr> outline_entry;
  // Name and system name of each function, keyed by its abstract DIE.
  std::unordered_map<const void*, std::pair<std::string, std::string>> names;
  // Each type spelled so far, as the demangler spells it.
  std::unordered_map<const void*, std::string> type_names;
  // The line rows of the last unit asked, for every address of the lookup
  // in this module (the lookup goes in address order: a unit's come together).
  UnitLines lines;
};

// A sized function symbol [start, end) in run-time addresses.
struct FuncSym {
  uint64_t start, end;
  const char* name;  // points into mi->table_names (own_symbol_names)
  int rank;          // lower is the better name among aliases
};

// One reported module: a file's mappings, or the [vdso].
struct ModInfo {
  std::string path;       // as in maps (may end in " (deleted)")
  bool vdso = false;
  bool shim_itself = false;  // the shim's library: named by symbols, its DWARF never read
  uint64_t low = 0, high = 0;
  uint64_t map_start = 0, map_end = 0;  // its first mapping, for /proc/self/map_files
  std::string build_id;   // raw bytes read from memory; empty if unknown
  std::vector<char> image;  // the [vdso]'s bytes, for elf_memory
  bool syms_loaded = false;
  std::vector<FuncSym> syms;  // sorted by start, one per start
  // The symbols came from the symbol cache's table (symbolize_table.cc):
  // their names are in table_names, and table_dwarf says whether libdw
  // found DWARF for the module (without it, the table alone names it).
  bool table_tried = false, syms_from_table = false;
  bool table_dwarf = false;
  std::string table_names;
  DwarfState dwarf;
  // Once the module's files were released (Session's release): whether its
  // DWARF was looked for, and found (dwarf is then empty again).
  bool dwarf_looked = false, dwarf_found = false;
  // The files libdw's callbacks opened or looked for, for the symbol cache;
  // false when one could not be opened for a reason that may pass (no
  // descriptor left, say): then what was found is not kept.
  std::vector<cache::Witness> witnesses;
  bool cache_ok = true;
  // The profiles' directory, whose symbol cache may hold an inflated copy
  // of this module's compressed debug file (symbolize_inflated.cc); "" for
  // none.
  std::string profile_dir;
};

// Demangles once per distinct symbol.
class Names {
 public:
  // The function's name from a symbol: demangled C++ or Rust
  // (symbolize_rust.h), and without the suffix of a compiler's clone
  // (".constprop.0", " [clone .isra.0]"): a clone is the same source
  // function, and so are its inlined calls.
  const std::string& demangle(const char* system_name);
 private:
  std::unordered_map<std::string, std::string> cache_;
};

// --- symbolize_image.cc: a loaded image, read from memory ---

// Copies [addr, addr + n) of this process's memory into buf; false if the
// range is not readable in lines or was unmapped since they were read.
bool read_memory(const std::vector<procmaps::Line>& lines, uint64_t addr, void* buf, size_t n);
// The NT_GNU_BUILD_ID of the ELF image whose file offset 0 is mapped at head
// (raw bytes; empty if none).
std::string build_id_from_memory(const std::vector<procmaps::Line>& lines, const procmaps::Line& head);
std::string hex(const std::string& bytes);
struct Dynamic {
  std::string soname;                // DT_SONAME, empty if none
  std::vector<std::string> needed;   // DT_NEEDED, in order
};
// The dynamic section of that image; false if it has none readable.
bool dynamic_from_memory(const std::vector<procmaps::Line>& lines, const procmaps::Line& head,
                         Dynamic* out);

// --- symbolize_own.cc ---

// Per module (heads: each one's line at file offset 0, or null): whether it
// is there only for the shim (Session::loaded_for_shim). self: an address in
// the shim's code; exe_path: the executable's path as in maps.
std::vector<bool> loaded_for_shim(const std::vector<procmaps::Line>& lines,
                                  const std::vector<const procmaps::Line*>& heads,
                                  const std::vector<std::unique_ptr<ModInfo>>& mods, uint64_t self,
                                  const std::string& exe_path);

// --- symbolize_files.cc: the files behind modules ---

// find_elf / find_debuginfo / debuginfo_path for dwfl_begin: a module's
// userdata is its ModInfo.
void fill_callbacks(Dwfl_Callbacks* cb);

// fd, an open debug file of mi: if its DWARF is compressed, the inflated
// copy of it in the symbol cache instead (made if need be; fd is then
// closed), else fd itself.
// ext: ".debug" for a separate debug file, ".elf" for the module's own file,
// which has the same build ID: each copy is of its own file.
int use_inflated(int fd, ModInfo* mi, const char* ext = ".debug");

// --- symbolize_table.cc: a module's function symbols in the symbol cache ---

// The table's bytes (relative to base, the module's first mapping), and
// back into *mi (syms, table_names, table_dwarf, witnesses): false when
// anything is wrong with them or they are another module's.
std::string encode_table(const ModInfo& mi, uint64_t base);
bool decode_table(const std::string& bytes, uint64_t base, ModInfo* mi);
// mi's table from dir if there is one, intact and current (its witnesses
// still say the same): then mi's symbols are loaded, and true.
bool table_from_cache(const std::string& dir, uint64_t base, ModInfo* mi);
// Whether mi is to be named from its table alone: its symbols are (or are
// now) the table's, and libdw found no DWARF for it.
bool table_names_it(const std::string& dir, ModInfo* mi);
// If so, *r gets pc's frames from it, and true (the caller keeps them in
// store once it has named them as their language does).
bool name_from_table(cache::Store* store, ModInfo* mi, uint64_t pc, Names* names, Result* r);
// mi's symbol names copied into mi->table_names, before libdw's string
// table they point into goes (or its pages do: drop_symbol_pages).
void own_symbol_names(ModInfo* mi);
// Writes mi's table, loaded through libdw and its DWARF looked for, to dir.
std::string table_to_cache(const std::string& dir, uint64_t base, const ModInfo& mi);

// --- symbolize_names.cc: the names of functions known from DWARF ---

// The name of the function of a subprogram or inlined-call DIE, as the
// symbol table names it (name: demangled; system_name: as in the table), so
// that a function has one name whether inlined or not. mi's symbols must be
// loaded.
void name_from_die(Dwarf_Die* die, ModInfo* mi, Names* names, pprof::Frame* f);
// The abstract DIE an inlined call or out-of-line copy was made from.
Dwarf_Die root_origin(Dwarf_Die* die);
bool is_type(int tag);  // class, struct, union, enum
bool is_cxx_unit(Dwarf_Die* cu);

// --- symbolize_dwarf.cc ---

// Walks the namespaces and types of a unit (and, with bodies, its functions'
// bodies) recording scope_of, unnamed_in and outline_entry; out-of-line
// functions' ranges go to *funcs when it is not null.
void walk_unit(Dwarf_Die* cu, bool bodies, DwarfState* st, std::vector<PcRange>* funcs);
// The symbol covering pc (run-time address), or null.
const FuncSym* find_symbol(const std::vector<FuncSym>& syms, uint64_t pc);

// The out-of-line functions of a unit, sorted; the unit is walked
// (walk_unit, shallow) on first use.
// The unit holding pc (a DWARF address) by .debug_aranges, read here;
// *known is false when this reader cannot read them (libdw's lookup then).
bool unit_by_aranges(DwarfState* st, Dwarf_Addr pc, Dwarf_Die* cu, bool* known);
// Reads .debug_aranges (once per module) and readies the walk.
void read_units(DwarfState* st);
// Drops the pages of elf's .symtab and its string table from this process
// where they lie in libdwfl's private mapping of the file (as UnitWalk's
// drops), once the names are copied out: libc6-dbg's are ~0.4 MiB, resident
// to the end of the module's lookup, at the stop's peak.
void drop_symbol_pages(Elf* elf);

const std::vector<PcRange>& cu_functions(DwarfState* st, Dwarf_Die* cu);

// A section of elf as stored, or null if it is absent, empty or compressed.
const Elf_Data* plain_section(Elf* elf, const char* name);

// --- symbolize_lines.cc ---

// Reads the line program of the unit cu into *out for the sorted DWARF
// addresses pcs: each one's row as dwarf_getsrc_die gives it, and the
// unit's file names. False (out->ok too) where libdw is to read it.
bool read_unit_lines(Dwarf* dbg, Dwarf_Die* cu, std::vector<uint64_t> pcs, UnitLines* out);

// dir/file with "." components and repeated slashes gone; file alone if it
// is absolute or dir is empty. ".." stays: a symlink may stand before it.
std::string join_path(const std::string& dir, const std::string& file);

// Appends pc's frames, innermost first: the function from the ELF symbol
// covering pc, file / line / inlined calls from DWARF where the module has
// them. Appends nothing when no name for pc's function is known: a frame
// with a wrong name is worse than none. True when a DWARF function held pc,
// so that its inlined calls, if any, are among the frames. batch: every
// address (run-time, sorted) the lookup asks, so that a unit's line
// program is read once for all of its own.
bool module_frames(Dwfl_Module* mod, ModInfo* mi, uint64_t pc, const std::vector<uint64_t>& batch,
                   Names* names, std::vector<pprof::Frame>* out);
// The same for a module libdw found no DWARF for, from its loaded symbols
// alone (without libdw).
void symbol_frames(ModInfo* mi, uint64_t pc, Names* names, std::vector<pprof::Frame>* out);

}  // namespace internal
}  // namespace symbolize
