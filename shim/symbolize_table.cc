// symbolize_table: a module's sorted function symbols kept in the symbol
// cache, PROFILE_DIR/.profshim-symbols/BUILDID.tab, beside its entry. A
// compiler's new samples each build fall in a binary without
// DWARF: naming them took libdw's module report and its 30,000-symbol table
// read, ranked and sorted again in every image (~6 ms of a cc1plus stop),
// for what a binary search in the kept table gives. Written by the image
// that loaded the symbols through libdw, with the witnesses of that lookup
// (symbolize_cache.h) and whether libdw found DWARF for the module; read
// only when its magic, checksum, build ID and every bound hold and every
// witness still says the same. Then the module's symbols are the table's,
// and a module without DWARF is named from them alone, without libdw; one
// with DWARF still gets its lines and inlined calls from libdw.
// Layout ("PSSYMT1\n" is its version: another layout is a corrupt file):
//   magic, str build ID, u8 DWARF found, witnesses (as in an entry),
//   u32 symbols, each: u64 start, u64 end (relative to the module's first
//   mapping), u32 name (offset in the names), str names (each NUL-ended),
//   u64 cache::checksum of everything before it.
// Not signal-safe: runs at the stop, on the stop's thread.
#include <string.h>

#include <algorithm>

#include "symbolize_internal.h"
#include "symbolize_wire.h"

namespace symbolize {
namespace internal {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'S', 'Y', 'M', 'T', '1', '\n'};
constexpr uint32_t kMaxSymbols = 1u << 22;

std::string table_path(const std::string& dir, const std::string& build_id) {
  return dir + "/" + hex(build_id) + ".tab";
}

}  // namespace

std::string encode_table(const ModInfo& mi, uint64_t base) {
  std::string out(kMagic, sizeof kMagic), names;
  wire::put32(&out, static_cast<uint32_t>(mi.build_id.size()));
  out += mi.build_id;
  out += char(mi.syms_from_table ? mi.table_dwarf : mi.dwarf.dw != nullptr || mi.dwarf_found);
  std::vector<cache::Witness> w = mi.witnesses;
  cache::normalize(&w);
  cache::put_witnesses(&out, w);
  wire::put32(&out, static_cast<uint32_t>(mi.syms.size()));
  for (const FuncSym& s : mi.syms) {
    wire::put64(&out, s.start - base);
    wire::put64(&out, s.end - base);
    wire::put32(&out, static_cast<uint32_t>(names.size()));
    names.append(s.name);
    names += '\0';
  }
  wire::put32(&out, static_cast<uint32_t>(names.size()));
  out += names;
  wire::put64(&out, cache::checksum(out.data(), out.size()));
  return out;
}

bool decode_table(const std::string& bytes, uint64_t base, ModInfo* mi) {
  if (bytes.size() < sizeof kMagic + 8 || memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return false;
  uint64_t sum;
  memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  const size_t end = bytes.size() - 8;
  if (sum != cache::checksum(bytes.data(), end)) return false;
  wire::Reader r{bytes, sizeof kMagic, bytes.size()};
  const uint32_t id_len = r.u32();
  if (!r.ok || id_len != mi->build_id.size() || id_len > end - r.pos ||
      bytes.compare(r.pos, id_len, mi->build_id) != 0)
    return false;
  r.pos += id_len;
  const uint8_t dwarf = r.u8();
  std::vector<cache::Witness> witnesses;
  if (!r.ok || dwarf > 1 || !cache::get_witnesses(bytes, &r.pos, &witnesses) || r.pos > end) return false;
  const uint32_t n = r.u32();
  if (!r.ok || n > kMaxSymbols || n > (end - r.pos) / 20) return false;
  const size_t at = r.pos;
  r.pos += size_t(n) * 20;
  const uint32_t names_len = r.u32();
  if (!r.ok || names_len != end - r.pos || (names_len && bytes[end - 1] != '\0')) return false;
  std::string names = bytes.substr(r.pos, names_len);
  std::vector<FuncSym> syms(n);
  r.pos = at;
  for (FuncSym& s : syms) {
    const uint64_t lo = r.u64(), hi = r.u64();
    const uint32_t name = r.u32();
    if (lo >= hi || name >= names_len || (&s != syms.data() && lo <= (&s - 1)->start - base)) return false;
    s = {lo + base, hi + base, nullptr, 0};
    s.rank = static_cast<int>(name);  // the offset until the names are in place
  }
  mi->table_names = std::move(names);
  for (FuncSym& s : syms) s.name = mi->table_names.data() + s.rank, s.rank = 0;
  mi->syms = std::move(syms);
  mi->syms_loaded = mi->syms_from_table = true;
  mi->table_dwarf = dwarf == 1;
  mi->witnesses.insert(mi->witnesses.end(), witnesses.begin(), witnesses.end());
  return true;
}

bool table_from_cache(const std::string& dir, uint64_t base, ModInfo* mi) {
  if (dir.empty() || mi->build_id.empty() || mi->syms_loaded) return false;
  std::string bytes;
  bool absent = false;
  if (!cache::read_whole(table_path(dir, mi->build_id), &bytes, &absent)) return false;
  ModInfo t;
  t.build_id = mi->build_id;
  if (!decode_table(bytes, base, &t)) return false;
  for (const cache::Witness& w : t.witnesses)
    if (!(cache::observe(w.path) == w)) return false;
  // (A short string's bytes move with it: the names are pointed at again.)
  for (FuncSym& s : t.syms) s.rank = static_cast<int>(s.name - t.table_names.data());
  mi->table_names = std::move(t.table_names);
  for (FuncSym& s : t.syms) s.name = mi->table_names.data() + s.rank, s.rank = 0;
  mi->syms = std::move(t.syms);
  mi->syms_loaded = mi->syms_from_table = true;
  mi->table_dwarf = t.table_dwarf;
  mi->witnesses.insert(mi->witnesses.end(), t.witnesses.begin(), t.witnesses.end());
  return true;
}

bool table_names_it(const std::string& dir, ModInfo* mi) {
  if (!mi->table_tried && !mi->syms_loaded && !mi->vdso) table_from_cache(dir, mi->low, mi);
  mi->table_tried = true;
  return mi->syms_from_table && !mi->table_dwarf;
}

bool name_from_table(cache::Store* store, ModInfo* mi, uint64_t pc, Names* names, Result* r) {
  if (!table_names_it(store->dir(false), mi)) return false;
  symbol_frames(mi, pc, names, &r->frames);
  store->note_lookup(true);
  return true;
}

void own_symbol_names(ModInfo* mi) {
  std::string names;
  std::vector<size_t> at;
  at.reserve(mi->syms.size());
  for (const FuncSym& s : mi->syms) {
    at.push_back(names.size());
    names.append(s.name).push_back('\0');
  }
  mi->table_names = std::move(names);
  for (size_t i = 0; i < mi->syms.size(); ++i) mi->syms[i].name = mi->table_names.data() + at[i];
}

std::string table_to_cache(const std::string& dir, uint64_t base, const ModInfo& mi) {
  if (dir.empty() || mi.build_id.empty() || !mi.syms_loaded || mi.syms_from_table ||
      !(mi.dwarf.tried || mi.dwarf_looked) ||
      !mi.cache_ok || mi.vdso || mi.syms.size() > kMaxSymbols)
    return "";
  return cache::write_whole(dir, hex(mi.build_id) + ".tab", encode_table(mi, base));
}

}  // namespace internal
}  // namespace symbolize
