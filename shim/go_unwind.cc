// go_unwind: walks Go frames with the tables the Go runtime walks them by
// (.gopclntab: for each function, its stack pointer's offset at each pc),
// as its own tracebacks and profiler do. Frame pointers alone are not
// enough: Go's assembly (crypto/sha256.block, say) uses the frame-pointer
// register for data, and a frameless function pushes none.
//
// Formats read: Go 1.16 and 1.17 (magic 0xfffffffa), 1.18 and 1.19
// (0xfffffff0), 1.20 on (0xfffffff1). Every read of the table is checked
// against its section's bounds, every read of a stack against the stack's.
// Signal-safe: no allocation, no lock, no call.
#include "go_unwind.h"

#include <string.h>

namespace go_unwind {
namespace {

struct Table {
  const unsigned char* base = nullptr;  // the header, .gopclntab's start
  uint64_t size = 0;
  uint32_t version = 0;  // 116, 118 or 120
  uint32_t min_lc = 1;
  uint64_t nfunc = 0;
  uint64_t text = 0;                     // function entries' base (1.18 on)
  const unsigned char* names = nullptr;  // function names (funcnametab)
  const unsigned char* pctab = nullptr;  // pc-value tables
  const unsigned char* functab = nullptr;
  uint64_t text_lo = 0, text_hi = 0;
  bool names_wanted = false;  // the executable has no DWARF to name its code
  uint64_t switches[kSwitches] = {};
};
Table g_t;

bool inside(const unsigned char* p, uint64_t n) {
  return p >= g_t.base && n <= g_t.size && uint64_t(p - g_t.base) <= g_t.size - n;
}

uint32_t u32(const unsigned char* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
uint64_t u64(const unsigned char* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

// The functab's entry i: its function's start and its _func's place.
bool entry(uint64_t i, uint64_t* pc, const unsigned char** func) {
  const uint64_t w = g_t.version >= 118 ? 8 : 16;
  const unsigned char* e = g_t.functab + i * w;
  if (!inside(e, w)) return false;
  uint64_t off;
  if (g_t.version >= 118) {
    *pc = g_t.text + u32(e);
    off = u32(e + 4);
  } else {
    *pc = u64(e);
    off = u64(e + 8);
  }
  *func = g_t.functab + off;
  return true;
}

// The function containing pc: its _func and its entry.
bool find(uint64_t pc, const unsigned char** func, uint64_t* start) {
  if (!g_t.base || pc < g_t.text_lo || pc >= g_t.text_hi) return false;
  uint64_t lo = 0, hi = g_t.nfunc;  // entry nfunc is the text's end
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2, at;
    const unsigned char* f;
    if (!entry(mid, &at, &f)) return false;
    if (at <= pc) lo = mid; else hi = mid;
  }
  uint64_t next;
  const unsigned char* f;
  if (!entry(lo, start, func) || !entry(lo + 1, &next, &f)) return false;
  return *start <= pc && pc < next && inside(*func, 24);
}

bool varint(const unsigned char** p, uint32_t* out) {
  uint32_t v = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (!inside(*p, 1)) return false;
    unsigned char b = *(*p)++;
    v |= uint32_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return *out = v, true;
  }
  return false;
}

// The stack pointer's offset from its value at entry, at pc (runtime.pcvalue).
bool sp_delta(const unsigned char* func, uint64_t start, uint64_t pc, int32_t* out) {
  uint32_t off = u32(func + (g_t.version >= 118 ? 16 : 20));
  if (off == 0) return *out = 0, true;
  const unsigned char* p = g_t.pctab + off;
  int32_t val = -1;
  uint64_t at = start;
  for (bool first = true;; first = false) {
    uint32_t uv, dpc;
    if (!varint(&p, &uv) || (uv == 0 && !first)) return false;
    val += (uv & 1) ? ~int32_t(uv >> 1) : int32_t(uv >> 1);
    if (!varint(&p, &dpc)) return false;
    at += uint64_t(dpc) * g_t.min_lc;
    if (pc < at) return *out = val, true;
  }
}

}  // namespace

bool load(const void* pclntab, uint64_t size, bool name_code) {
  const auto* h = static_cast<const unsigned char*>(pclntab);
  if (size < 64 || h[4] != 0 || h[5] != 0 || h[7] != 8) return false;
  Table t;
  t.base = h, t.size = size, t.min_lc = h[6] ? h[6] : 1;
  switch (u32(h)) {
    case 0xfffffffa: t.version = 116; break;
    case 0xfffffff0: t.version = 118; break;
    case 0xfffffff1: t.version = 120; break;
    default: return false;
  }
  t.nfunc = u64(h + 8);
  // Then nfiles; 1.18 on: textStart; then the offsets of funcnametab, cutab,
  // filetab, pctab and pclntab (the functab) from the header.
  const unsigned char* offs = h + 24;
  if (t.version >= 118) t.text = u64(offs), offs += 8;
  uint64_t names = u64(offs), pctab = u64(offs + 24), pcln = u64(offs + 32);
  if (names >= size || pctab >= size || pcln >= size || t.nfunc == 0 || t.nfunc > size) return false;
  t.names = h + names, t.pctab = h + pctab, t.functab = h + pcln;
  t.names_wanted = name_code;
  g_t = t;
  // The functions' span: the first one's entry to the table's end entry.
  const unsigned char* f;
  if (!entry(0, &g_t.text_lo, &f) || !entry(t.nfunc, &g_t.text_hi, &f) || g_t.text_lo >= g_t.text_hi) {
    g_t = Table();
    return false;
  }
  g_t.switches[kSystemstack] = find_function("runtime.systemstack");
  g_t.switches[kMorestack] = find_function("runtime.morestack");
  g_t.switches[kMcall] = find_function("runtime.mcall");
  g_t.switches[kSystemstackSwitch] = find_function("runtime.systemstack_switch");
  g_t.switches[kAsmcgocall] = find_function("runtime.asmcgocall");
  g_t.switches[kMorestackNoctxt] = find_function("runtime.morestack_noctxt");
  return true;
}

uint64_t switch_entry(Switch which) { return g_t.switches[which]; }

uint64_t find_function(const char* name) {
  const size_t len = strlen(name);
  for (uint64_t i = 0; g_t.base && i < g_t.nfunc; ++i) {
    uint64_t pc;
    const unsigned char* f;
    if (!entry(i, &pc, &f) || !inside(f, 16)) return 0;
    // _func.nameOff: at 4 from 1.18 on, at 8 before (after a uintptr entry).
    int32_t off;
    memcpy(&off, f + (g_t.version >= 118 ? 4 : 8), 4);
    const unsigned char* n = g_t.names + off;
    if (off >= 0 && inside(n, len + 1) && memcmp(n, name, len + 1) == 0) return pc;
  }
  return 0;
}

const char* name_of(uint64_t pc) {
  const unsigned char* f;
  uint64_t start;
  if (!g_t.names_wanted || !find(pc, &f, &start)) return nullptr;
  int32_t off;
  memcpy(&off, f + (g_t.version >= 118 ? 4 : 8), 4);
  const unsigned char* n = g_t.names + off;
  if (off < 0 || !inside(n, 1)) return nullptr;
  // NUL-terminated inside the table, or no name.
  for (const unsigned char* p = n; inside(p, 1); ++p)
    if (*p == 0) return reinterpret_cast<const char*>(n);
  return nullptr;
}

uint64_t start_of(uint64_t pc) {
  const unsigned char* f;
  uint64_t start;
  return find(pc, &f, &start) ? start : 0;
}

bool in_go(uint64_t pc) {
  const unsigned char* f;
  uint64_t start;
  return find(pc, &f, &start);
}

int walk(uint64_t pc, uintptr_t sp, uintptr_t lo, uintptr_t hi, uint64_t* frames, int n, int max, Switch* at) {
  *at = kNoSwitch;
  while (n < max) {
    const unsigned char* f;
    uint64_t start;
    int32_t d;
    if (!find(pc, &f, &start)) break;
    for (int s = kSystemstack; s <= kMcall; ++s)
      if (start == g_t.switches[s]) return *at = Switch(s), n;
    if (!sp_delta(f, start, pc, &d) || d < 0) break;
    // On amd64 the return address lies just above the frame.
    uintptr_t slot = sp + uintptr_t(d);
    if (slot < lo || slot < sp || slot + 8 > hi) break;
    // Past code that switched stacks by hand (cgo's calls) the slot holds
    // no Go return address: the walk ends there.
    uint64_t ret = *reinterpret_cast<const uint64_t*>(slot);
    if (!in_go(ret)) break;
    frames[n++] = ret;
    pc = ret, sp = slot + 8;
  }
  return n;
}

}  // namespace go_unwind
