// symbolize_lines: a unit's line numbers read from .debug_line here, for the
// addresses a stop asks, without libdw's copy of the unit's line table.
// libdw decodes a unit's whole line program into a sorted array the first
// time one of its addresses is asked, and keeps it until the module is
// released: Go's runtime unit alone has ~100,000 rows, and libdw's array of
// them (3.7 MiB), its sorting copy (2.6 MiB) and a malloc'd node per row
// made a cgo Go program's stop add 12.5 MiB to its peak RSS. Here the
// program is decoded once per unit in one pass against the sorted
// addresses wanted, each address keeping the row libdw would give it
// (dwarf_getsrc_die: the last row at the highest address at or below it,
// none when that is a sequence's end); what is kept is one row per address
// and the unit's file names. Anything this reader does not know (a form,
// an opcode, VLIW operations, addresses that go back) leaves the unit to
// libdw, as before.
#include <gelf.h>

#include <algorithm>
#include <cstring>

#include "symbolize_internal.h"

namespace symbolize {
namespace internal {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the reader takes the section's bytes as the host's");

// Bounds-checked reads; any read past the end sets bad and reads zeros.
struct Reader {
  const unsigned char* p;
  const unsigned char* end;
  bool bad = false;

  bool has(uint64_t n) {
    if (bad || static_cast<uint64_t>(end - p) < n) bad = true;
    return !bad;
  }
  uint64_t u(unsigned n) {  // n <= 8, little-endian
    if (!has(n)) return 0;
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    p += n;
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (!has(1)) return 0;
      const unsigned char b = *p++;
      if (shift < 64) v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  int64_t sleb() {
    uint64_t v = 0;
    unsigned shift = 0;
    unsigned char b;
    do {
      if (!has(1)) return 0;
      b = *p++;
      if (shift < 64) v |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~static_cast<uint64_t>(0) << shift;
    return static_cast<int64_t>(v);
  }
  const char* str() {
    if (bad) return nullptr;
    const void* z = std::memchr(p, 0, end - p);
    if (!z) {
      bad = true;
      return nullptr;
    }
    const char* s = reinterpret_cast<const char*>(p);
    p = static_cast<const unsigned char*>(z) + 1;
    return s;
  }
};

struct Sections {
  const Elf_Data* line = nullptr;
  const Elf_Data* line_str = nullptr;
  const Elf_Data* str = nullptr;
};

const char* string_at(const Elf_Data* d, uint64_t off) {
  if (!d || off >= d->d_size) return nullptr;
  const char* s = static_cast<const char*>(d->d_buf) + off;
  return std::memchr(s, 0, d->d_size - off) ? s : nullptr;
}

// One value of a DWARF 5 directory or file entry: its string (a path) or
// number; false for a form this reader does not know.
bool entry_value(Reader* r, uint64_t form, unsigned offsize, const Sections& s, const char** str,
                 uint64_t* num) {
  *str = nullptr;
  *num = 0;
  switch (form) {
    case DW_FORM_string: *str = r->str(); return *str != nullptr;
    case DW_FORM_line_strp: *str = string_at(s.line_str, r->u(offsize)); return *str != nullptr && !r->bad;
    case DW_FORM_strp: *str = string_at(s.str, r->u(offsize)); return *str != nullptr && !r->bad;
    case DW_FORM_data1: *num = r->u(1); break;
    case DW_FORM_data2: *num = r->u(2); break;
    case DW_FORM_data4: *num = r->u(4); break;
    case DW_FORM_data8: *num = r->u(8); break;
    case DW_FORM_udata: *num = r->uleb(); break;
    case DW_FORM_data16:
      if (r->has(16)) r->p += 16;
      break;
    case DW_FORM_block: {
      const uint64_t n = r->uleb();
      if (r->has(n)) r->p += n;
      break;
    }
    default: return false;
  }
  return !r->bad;
}

// As libdw names a file: absolute as it is, else under its directory
// when the directory is known (the unit's comp_dir for index 0 before
// DWARF 5); source_file() makes what is still relative absolute.
std::string file_name(const char* dir, const char* name) {
  if (name[0] == '/' || !dir) return name;
  return std::string(dir) + "/" + name;
}

// The DWARF 5 list of directories or files: each entry's path and
// directory index.
bool v5_entries(Reader* r, unsigned offsize, const Sections& s, std::vector<std::pair<const char*, uint64_t>>* out) {
  const unsigned nformats = r->u(1);
  std::vector<std::pair<uint64_t, uint64_t>> formats;
  for (unsigned i = 0; i < nformats; ++i) {
    const uint64_t type = r->uleb();
    formats.emplace_back(type, r->uleb());
  }
  const uint64_t count = r->uleb();
  if (r->bad || count > static_cast<uint64_t>(r->end - r->p)) return false;  // each entry takes a byte at least
  for (uint64_t i = 0; i < count; ++i) {
    const char* path = nullptr;
    uint64_t dir = 0;
    for (const auto& f : formats) {
      const char* str;
      uint64_t num;
      if (!entry_value(r, f.second, offsize, s, &str, &num)) return false;
      if (f.first == DW_LNCT_path) path = str;
      if (f.first == DW_LNCT_directory_index) dir = num;
    }
    if (!path) return false;
    out->emplace_back(path, dir);
  }
  return !r->bad;
}

// The rows of one line program against the sorted addresses pcs (libdw's
// answer for each, see the file's comment). False where libdw is to read it.
class Program {
 public:
  Program(const std::vector<uint64_t>& pcs, std::vector<LineRow>* best) : pcs_(pcs), best_(*best) {}

  // A row: the previous one of its sequence covers [its address, this one's).
  bool row(uint64_t addr, uint32_t file, int64_t line, bool end) {
    if (have_prev_) {
      if (addr < prev_.addr) return false;  // addresses that go back: libdw sorts them
      if (addr > prev_.addr)
        cover(prev_, addr);
      else if (end)  // a last row of no length: libdw sorts the end before it, so it stays
        cover(prev_, ~static_cast<uint64_t>(0));
    }
    top_ = std::max(top_, addr);
    if (end) {
      ends_.push_back(addr);
      have_prev_ = false;
    } else {
      prev_ = LineRow{addr, file, line, true};
      have_prev_ = true;
    }
    return true;
  }

  // An address past a sequence's end (and no row after that end at or
  // below it) has no line, as libdw answers; nor has one at or past the
  // unit's highest row, which libdw makes an end if it was not.
  void finish() {
    std::sort(ends_.begin(), ends_.end());
    for (size_t k = 0; k < pcs_.size(); ++k) {
      if (pcs_[k] >= top_) best_[k].found = false;
      if (!best_[k].found) continue;
      auto e = std::upper_bound(ends_.begin(), ends_.end(), best_[k].addr);
      if (e != ends_.end() && *e <= pcs_[k]) best_[k].found = false;
    }
  }

 private:
  void cover(const LineRow& b, uint64_t hi) {
    for (size_t k = std::lower_bound(pcs_.begin(), pcs_.end(), b.addr) - pcs_.begin();
         k < pcs_.size() && pcs_[k] < hi; ++k)
      if (!best_[k].found || best_[k].addr <= b.addr) best_[k] = b;  // the higher row, or the later at one address
  }

  const std::vector<uint64_t>& pcs_;
  std::vector<LineRow>& best_;
  std::vector<uint64_t> ends_;
  LineRow prev_;
  bool have_prev_ = false;
  uint64_t top_ = 0;  // the highest row's address
};

// The unit's line program at off: its file names into out->files and each
// of out->pcs' rows into out->rows. False for anything this reader does not know.
bool read_program(const Sections& s, uint64_t off, const char* comp_dir, UnitLines* out) {
  const Elf_Data* d = s.line;
  if (off >= d->d_size) return false;
  const unsigned char* base = static_cast<const unsigned char*>(d->d_buf);
  Reader r{base + off, base + d->d_size};
  uint64_t len = r.u(4);
  unsigned offsize = 4;
  if (len == 0xffffffff) {
    len = r.u(8);
    offsize = 8;
  } else if (len >= 0xfffffff0) {
    return false;
  }
  if (!r.has(len)) return false;
  r.end = r.p + len;
  const unsigned version = r.u(2);
  if (version < 2 || version > 5) return false;
  if (version >= 5) {
    r.u(1);  // address size: DW_LNE_set_address says its own
    if (r.u(1) != 0) return false;  // segment selectors
  }
  const uint64_t header_len = r.u(offsize);
  if (!r.has(header_len)) return false;
  const unsigned char* program = r.p + header_len;
  const unsigned min_inst = r.u(1);
  if (version >= 4 && r.u(1) != 1) return false;  // VLIW operations
  r.u(1);  // default_is_stmt: every row counts, as in libdw
  const int line_base = static_cast<int8_t>(r.u(1));
  const unsigned line_range = r.u(1);
  const unsigned opcode_base = r.u(1);
  if (r.bad || line_range == 0 || opcode_base == 0) return false;
  std::vector<unsigned> arg_count(opcode_base, 0);
  for (unsigned i = 1; i < opcode_base; ++i) arg_count[i] = r.u(1);

  std::vector<std::pair<const char*, uint64_t>> dirs, files;
  if (version >= 5) {
    if (!v5_entries(&r, offsize, s, &dirs) || !v5_entries(&r, offsize, s, &files)) return false;
  } else {
    dirs.emplace_back(comp_dir, 0);
    for (const char* dir; (dir = r.str()) && *dir;) dirs.emplace_back(dir, 0);
    files.emplace_back("???", 0);  // libdw's entry 0 before DWARF 5
    for (const char* name; (name = r.str()) && *name;) {
      const uint64_t dir = r.uleb();
      r.uleb();  // modification time
      r.uleb();  // length
      files.emplace_back(name, dir);
    }
  }
  if (r.bad || program > r.end || r.p > program) return false;
  out->files.clear();
  for (size_t i = 0; i < files.size(); ++i) {
    const uint64_t dir = files[i].second;
    if (i == 0 && version < 5) {
      out->files.emplace_back(files[i].first);
      continue;
    }
    if (dir >= dirs.size()) return false;
    out->files.push_back(file_name(dirs[dir].first, files[i].first));
  }

  Program rows(out->pcs, &out->rows);
  r.p = program;
  uint64_t addr = 0;
  uint64_t file = 1;
  int64_t line = 1;
  const auto emit = [&](bool end) { return file <= UINT32_MAX && rows.row(addr, file, line, end); };
  while (r.p < r.end) {
    const unsigned op = r.u(1);
    if (op >= opcode_base) {
      const unsigned adj = op - opcode_base;
      addr += static_cast<uint64_t>(min_inst) * (adj / line_range);
      if (__builtin_add_overflow(line, line_base + static_cast<int>(adj % line_range), &line)) return false;
      if (!emit(false)) return false;
      continue;
    }
    switch (op) {
      case 0: {  // extended
        const uint64_t n = r.uleb();
        if (n == 0 || !r.has(n)) return false;
        const unsigned char* next = r.p + n;
        const unsigned sub = r.u(1);
        if (sub == DW_LNE_end_sequence) {
          if (!emit(true)) return false;
          addr = 0, file = 1, line = 1;
        } else if (sub == DW_LNE_set_address) {
          if (n - 1 != 4 && n - 1 != 8) return false;
          addr = r.u(n - 1);
        } else if (sub == DW_LNE_define_file) {
          return false;
        }
        r.p = next;
        break;
      }
      case DW_LNS_copy:
        if (!emit(false)) return false;
        break;
      case DW_LNS_advance_pc: addr += min_inst * r.uleb(); break;
      case DW_LNS_advance_line:
        if (__builtin_add_overflow(line, r.sleb(), &line)) return false;
        break;
      case DW_LNS_set_file: file = r.uleb(); break;
      case DW_LNS_const_add_pc: addr += static_cast<uint64_t>(min_inst) * ((255 - opcode_base) / line_range); break;
      case DW_LNS_fixed_advance_pc: addr += r.u(2); break;
      default:  // set_column, negate_stmt, prologue_end, set_isa... and ones this reader does not know
        for (unsigned i = 0; i < arg_count[op]; ++i) r.uleb();
    }
    if (r.bad) return false;
  }
  rows.finish();
  return true;
}

}  // namespace

bool read_unit_lines(Dwarf* dbg, Dwarf_Die* cu, std::vector<uint64_t> pcs, UnitLines* out) {
  out->unit = cu->addr;
  out->ok = false;
  out->rows.assign(pcs.size(), LineRow());
  out->pcs = std::move(pcs);
  Elf* elf = dbg ? dw().dwarf_getelf(dbg) : nullptr;
  const unsigned char* ident = elf ? reinterpret_cast<const unsigned char*>(dw().elf_getident(elf, nullptr)) : nullptr;
  if (!ident || ident[EI_DATA] != ELFDATA2LSB) return false;
  Dwarf_Attribute a;
  Dwarf_Word off;
  if (dw().dwarf_formudata(dw().dwarf_attr(cu, DW_AT_stmt_list, &a), &off) != 0) return false;
  Sections s;
  s.line = plain_section(elf, ".debug_line");
  if (!s.line) return false;
  s.line_str = plain_section(elf, ".debug_line_str");
  s.str = plain_section(elf, ".debug_str");
  const char* comp_dir = dw().dwarf_formstring(dw().dwarf_attr(cu, DW_AT_comp_dir, &a));
  if (!read_program(s, off, comp_dir, out)) {
    out->files.clear();
    return false;
  }
  out->ok = true;
  return true;
}

}  // namespace internal
}  // namespace symbolize
