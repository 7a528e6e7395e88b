// symbolize_units: the compile unit holding an address, found without the
// whole of .debug_info becoming resident. libdw makes a DIE of a unit only
// after interning the header of every unit before it, and its
// dwarf_getaranges reads every unit's header too: libc6-dbg's 4,126 headers
// lie on 933 of its 1,414 pages, and with the kernel's fault-around all of
// the section was mapped at the stop (~6 MiB of a process's peak RSS).
// Here .debug_aranges is read directly, the units up to the one wanted are
// interned a slice at a time, and each slice's pages are dropped from this
// process behind the walk (they stay in the page cache and fault back if
// read again). The peak holds one slice, not the section.
#include <gelf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "fsroot.h"
#include "procmaps.h"
#include "symbolize_internal.h"
#include "sys.h"

namespace symbolize {
namespace internal {

const Elf_Data* plain_section(Elf* elf, const char* want) {
  size_t shstrndx;
  if (dw().elf_getshdrstrndx(elf, &shstrndx) != 0) return nullptr;
  for (Elf_Scn* scn = dw().elf_nextscn(elf, nullptr); scn; scn = dw().elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!dw().gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
    const char* name = dw().elf_strptr(elf, shstrndx, sh.sh_name);
    if (!name || std::strcmp(name, want) != 0) continue;
    if (sh.sh_flags & SHF_COMPRESSED) return nullptr;  // libdw inflates it; not read here
    Elf_Data* d = dw().elf_getdata(scn, nullptr);
    return d && d->d_buf && d->d_size ? d : nullptr;
  }
  return nullptr;
}

namespace {

template <typename T>
T get(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// .debug_aranges as libdw reads it (sets of (address, length) tuples, each
// set naming its unit's offset), sorted by address, and the units named. False if the section
// is not one this reader knows (then libdw's own lookup is used).
bool read_aranges(Elf* elf, std::vector<UnitRange>* out, std::vector<uint64_t>* units) {
  const unsigned char* ident = reinterpret_cast<const unsigned char*>(dw().elf_getident(elf, nullptr));
  const unsigned char host = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
  if (!ident || ident[EI_DATA] != host) return false;
  const Elf_Data* d = plain_section(elf, ".debug_aranges");
  if (!d) return true;  // none (clang's default): the units' own ranges answer
  const unsigned char* p = static_cast<const unsigned char*>(d->d_buf);
  const unsigned char* const end = p + d->d_size;
  while (end - p >= 4) {
    const unsigned char* const set = p;
    uint64_t len = get<uint32_t>(p);
    p += 4;
    unsigned offsize = 4;
    if (len == 0xffffffff) {
      if (end - p < 8) return false;
      len = get<uint64_t>(p);
      p += 8;
      offsize = 8;
    } else if (len >= 0xfffffff0) {
      return false;
    }
    if (len > static_cast<uint64_t>(end - p) || len < 2u + offsize + 2) return false;
    const unsigned char* const set_end = p + len;
    if (get<uint16_t>(p) != 2) return false;
    p += 2;
    const uint64_t cu = offsize == 4 ? get<uint32_t>(p) : get<uint64_t>(p);
    p += offsize;
    const unsigned asize = p[0], segsize = p[1];
    p += 2;
    if ((asize != 4 && asize != 8) || segsize != 0) return false;
    const uint64_t tuple = 2 * asize;
    p += (tuple - (p - set) % tuple) % tuple;
    if (p > set_end) return false;  // a set too short for its own padding: not one to trust
    while (set_end - p >= static_cast<ptrdiff_t>(tuple)) {
      const uint64_t lo = asize == 8 ? get<uint64_t>(p) : get<uint32_t>(p);
      const uint64_t n = asize == 8 ? get<uint64_t>(p + 8) : get<uint32_t>(p + 4);
      p += tuple;
      if (lo == 0 && n == 0) break;
      if (n && lo + n > lo) out->push_back({lo, lo + n, cu, 0});
    }
    units->push_back(cu);
    p = set_end;
  }
  std::stable_sort(out->begin(), out->end(), [](const UnitRange& a, const UnitRange& b) { return a.lo < b.lo; });
  uint64_t reach = 0;
  for (UnitRange& r : *out) r.reach = reach = std::max(reach, r.hi);
  std::sort(units->begin(), units->end());
  units->erase(std::unique(units->begin(), units->end()), units->end());
  return true;
}

// Pages of [p, p + n) may be dropped only from a private mapping of a file
// (libdwfl's, ELF_C_READ_MMAP_PRIVATE): there a page not written to is the
// page cache's, and comes back as it was. Never from the heap, where libelf
// puts a section it read or inflated.
bool droppable(const void* p, size_t n, bool* writable = nullptr) {
  const uint64_t a = reinterpret_cast<uintptr_t>(p);
  for (const procmaps::Line& l : procmaps::parse(sys::read_file(sys::proc_thread_self("maps").c_str())))
    if (a >= l.start && a < l.end) {
      if (writable) *writable = l.perms[1] == 'w';
      return a + n <= l.end && l.is_file() && l.perms[3] == 'p';
    }
  return false;
}

// Whether no page of [from, to) is an anonymous copy (a write's, which
// dropping would undo): libdw writes to no section of a debug file that is
// not ET_REL, and this checks it, page by page, before each drop
// (/proc/self/pagemap: bit 63 present, 62 swapped, 61 a file's page).
bool only_file_pages(uintptr_t from, uintptr_t to, long page) {
  const int fd = fsroot::open(sys::proc_thread_self("pagemap").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = true;
  uint64_t e[64];
  for (uintptr_t a = from; ok && a < to;) {
    const size_t n = std::min<uintptr_t>(64, (to - a) / page);
    ok = pread(fd, e, n * 8, a / page * 8) == static_cast<ssize_t>(n * 8);
    for (size_t i = 0; ok && i < n; ++i)
      ok = !(e[i] >> 62 & 1) && (!(e[i] >> 63 & 1) || (e[i] >> 61 & 1));
    a += n * page;
  }
  close(fd);
  return ok;
}

// Drops the pages of [a, b) (page-aligned), after checking them where the
// mapping can be written (a mapping no one can write to holds only the
// file's pages).
void drop_pages(uintptr_t a, uintptr_t b, long page, bool check) {
  if (b > a && (!check || only_file_pages(a, b, page))) sys::advise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
}

}  // namespace

void UnitWalk::begin(Dwarf* dwarf) {
  started = true;
  dbg = dwarf;
  Elf* elf = dw().dwarf_getelf(dwarf);
  GElf_Ehdr eh;
  if (!elf || !dw().gelf_getehdr(elf, &eh) || eh.e_type == ET_REL) return;  // libdwfl relocates those in place
  const Elf_Data* d = plain_section(elf, ".debug_info");
  if (d && droppable(d->d_buf, d->d_size)) {
    base = static_cast<const unsigned char*>(d->d_buf);
    size = d->d_size;
  }
  // The span of the debug sections in the file's mapping (libelf maps the
  // whole file: a section's data is the mapping's base plus its offset).
  size_t shstrndx;
  if (!base || dw().elf_getshdrstrndx(elf, &shstrndx) != 0) return;
  bool has_info = false;
  uint64_t lo = UINT64_MAX, hi = 0, info_off = 0;
  for (Elf_Scn* scn = dw().elf_nextscn(elf, nullptr); scn; scn = dw().elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!dw().gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || (sh.sh_flags & SHF_COMPRESSED)) continue;
    const char* name = dw().elf_strptr(elf, shstrndx, sh.sh_name);
    if (!name || std::strncmp(name, ".debug_", 7) != 0) continue;
    if (std::strcmp(name, ".debug_info") == 0) has_info = true, info_off = sh.sh_offset;
    lo = std::min<uint64_t>(lo, sh.sh_offset);
    hi = std::max<uint64_t>(hi, sh.sh_offset + sh.sh_size);
  }
  if (!has_info || hi <= lo || info_off < lo) return;
  const unsigned char* from = base - (info_off - lo);
  bool writable = true;
  if (droppable(from, hi - lo, &writable)) span = from, span_size = hi - lo, span_checked = writable;
}

void UnitWalk::drop(uint64_t from, uint64_t to) {
  if (!base) return;
  const long page = sysconf(_SC_PAGESIZE);
  const uintptr_t a = (reinterpret_cast<uintptr_t>(base) + from) & ~(page - 1);
  const uintptr_t b = (reinterpret_cast<uintptr_t>(base) + std::min<uint64_t>(to, size)) & ~(page - 1);
  drop_pages(a, b, page, true);
}

void UnitWalk::enter_unit(const void* unit) {
  if (unit == last_unit) return;
  last_unit = unit;
  if (!span || ++units_left % kUnitsPerDrop != 0) return;
  const long page = sysconf(_SC_PAGESIZE);
  const uintptr_t a = (reinterpret_cast<uintptr_t>(span) + page - 1) & ~(page - 1);
  const uintptr_t b = (reinterpret_cast<uintptr_t>(span) + span_size) & ~(page - 1);
  drop_pages(a, b, page, span_checked);
}

bool UnitWalk::unit_die(uint64_t cu_off, Dwarf_Die* cu) {
  Dwarf_Off off = next, nxt, slice = next;
  size_t header;
  while (off <= cu_off && dw().dwarf_nextcu(dbg, off, &nxt, &header, nullptr, nullptr, nullptr) == 0) {
    if (off == cu_off || off >= slice + kSlice) {
      // Interns every unit up to this one: their headers are resident now.
      if (!dw().dwarf_offdie(dbg, off + header, cu)) return false;
      next = std::max<uint64_t>(next, nxt);
      drop(slice, off);
      slice = off;
      if (off == cu_off) return true;
    }
    off = nxt;
  }
  return false;
}

void drop_symbol_pages(Elf* elf) {
  size_t shstrndx;
  if (!elf || dw().elf_getshdrstrndx(elf, &shstrndx) != 0) return;
  const long page = sysconf(_SC_PAGESIZE);
  for (Elf_Scn* scn = dw().elf_nextscn(elf, nullptr); scn; scn = dw().elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!dw().gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB) continue;
    for (Elf_Scn* s : {scn, dw().elf_getscn(elf, sh.sh_link)}) {
      GElf_Shdr h;
      if (!s || !dw().gelf_getshdr(s, &h) || h.sh_type == SHT_NOBITS || (h.sh_flags & SHF_COMPRESSED)) continue;
      // The data libdwfl read (elf_getdata keeps it): in the file's
      // mapping, or on the heap where libelf converted it (never dropped).
      // Checked page by page whatever the mapping's permissions: a few
      // hundred pages, once per module.
      Elf_Data* d = dw().elf_getdata(s, nullptr);
      if (!d || !d->d_buf || !d->d_size || !droppable(d->d_buf, d->d_size)) continue;
      const uintptr_t a = (reinterpret_cast<uintptr_t>(d->d_buf) + page - 1) & ~(page - 1);
      const uintptr_t b = (reinterpret_cast<uintptr_t>(d->d_buf) + d->d_size) & ~(page - 1);
      drop_pages(a, b, page, true);
    }
  }
}

void read_units(DwarfState* st) {
  st->walk.begin(st->dw);
  st->aranges_read = read_aranges(dw().dwarf_getelf(st->dw), &st->aranges, &st->aranged_units);
  if (!st->aranges_read) st->aranged_units.clear();
}

bool unit_by_aranges(DwarfState* st, Dwarf_Addr pc, Dwarf_Die* cu, bool* known) {
  if (!st->walk.started) read_units(st);
  *known = st->aranges_read;
  if (!st->aranges_read) return false;
  auto it = std::upper_bound(st->aranges.begin(), st->aranges.end(), pc,
                             [](uint64_t v, const UnitRange& r) { return v < r.lo; });
  // The last range that starts at or below pc, or one before it that
  // reaches past pc (a unit's range nested in another's).
  uint64_t want = UINT64_MAX;
  while (it != st->aranges.begin()) {
    --it;
    if (it->reach <= pc) break;
    if (pc < it->hi) {
      want = it->cu;
      break;
    }
  }
  if (want == UINT64_MAX) return false;
  // A unit already passed (or interned by libdw some other way) is found
  // at once by its offset.
  if (want >= st->walk.next) return st->walk.unit_die(want, cu);
  Dwarf_Off nxt;
  size_t header;
  return dw().dwarf_nextcu(st->dw, want, &nxt, &header, nullptr, nullptr, nullptr) == 0 &&
         dw().dwarf_offdie(st->dw, want + header, cu);
}

}  // namespace internal
}  // namespace symbolize
