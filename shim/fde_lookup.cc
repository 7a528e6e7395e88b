// fde_lookup: see fde_lookup.h. The layout read here is the one the
// linkers write and libgcc reads (unwind-dw2-fde-dip.c, find_fde_tail):
// .eh_frame_hdr's version, three pointer encodings, the pointer to
// .eh_frame, the entry count and a table of (initial location, FDE) pairs
// sorted by location, each a 4-byte offset from the header.
#include "fde_lookup.h"

#include <string.h>

#include "glibc_compat.h"

namespace fde_lookup {
namespace {

// DWARF pointer encodings (the low nibble is the format, the high the base).
constexpr uint8_t kOmit = 0xff, kAbsptr = 0x00, kUleb128 = 0x01, kUdata2 = 0x02, kUdata4 = 0x03,
                  kUdata8 = 0x04, kSleb128 = 0x09, kSdata2 = 0x0a, kSdata4 = 0x0b, kSdata8 = 0x0c,
                  kPcrel = 0x10, kDatarel = 0x30, kAligned = 0x50;

const uint8_t* skip_leb128(const uint8_t* p) {
  while (*p++ & 0x80) {
  }
  return p;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  memcpy(&v, p, sizeof v);
  return v;
}

// The value's format only (no base added: lengths and ranges are read so),
// and where it ends; null for a format libgcc does not read either.
const uint8_t* read_format(uint8_t enc, const uint8_t* p, uint64_t* out) {
  switch (enc & 0x0f) {
    case kAbsptr: *out = load<uint64_t>(p); return p + 8;
    case kUdata2: *out = load<uint16_t>(p); return p + 2;
    case kSdata2: *out = uint64_t(int64_t(load<int16_t>(p))); return p + 2;
    case kUdata4: *out = load<uint32_t>(p); return p + 4;
    case kSdata4: *out = uint64_t(int64_t(load<int32_t>(p))); return p + 4;
    case kUdata8:
    case kSdata8: *out = load<uint64_t>(p); return p + 8;
    default: return nullptr;  // leb128 here is never written for addresses
  }
}

// The encoding of an FDE's addresses, named in its CIE's augmentation ('R'),
// or kOmit where the CIE is of a shape libgcc does not read either.
uint8_t fde_encoding(const uint8_t* fde) {
  const uint8_t* delta_at = fde + 4;
  const uint8_t* cie = delta_at - load<int32_t>(delta_at);
  const uint8_t version = cie[8];
  const char* aug = reinterpret_cast<const char*>(cie + 9);
  const uint8_t* p = cie + 9 + strlen(aug) + 1;
  if (version >= 4) {
    if (p[0] != sizeof(void*) || p[1] != 0) return kOmit;
    p += 2;  // address and segment selector sizes
  }
  if (aug[0] != 'z') return kAbsptr;
  p = skip_leb128(p);                              // code alignment
  p = skip_leb128(p);                              // data alignment
  p = version == 1 ? p + 1 : skip_leb128(p);       // return address column
  p = skip_leb128(p);                              // augmentation data length
  for (++aug;; ++aug) {
    if (*aug == 'R') return *p;
    if (*aug == 'P') {
      // The personality's encoding, then its pointer (aligned: to 8).
      const uint8_t penc = *p++ & 0x7f;
      if ((penc & 0x70) == kAligned) p = reinterpret_cast<const uint8_t*>((uintptr_t(p) + 7) & ~uintptr_t(7));
      uint64_t ignored;
      if ((penc & 0x0f) == kUleb128 || (penc & 0x0f) == kSleb128) p = skip_leb128(p);
      else if (!(p = read_format(penc, p, &ignored))) return kOmit;
    } else if (*aug == 'L' || *aug == 'B') {
      ++p;  // the LSDA's encoding; aarch64's pointer-authentication key
    } else {
      return kAbsptr;  // the end, or an augmentation that names no encoding
    }
  }
}

int size_of(uint8_t enc) {
  switch (enc & 0x07) {
    case kAbsptr: return 8;
    case kUdata2: return 2;
    case kUdata4: return 4;
    case kUdata8: return 8;
    default: return 0;
  }
}

}  // namespace

const void* find(void* pc, Bases* bases) {
  glibc_compat::FoundObject obj;
  if (glibc_compat::dl_find_object(pc, &obj) != 0 || !obj.eh_frame) return nullptr;
  const uint8_t* hdr = static_cast<const uint8_t*>(obj.eh_frame);
  const uint8_t version = hdr[0], ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
  if (version != 1 || count_enc == kOmit || table_enc != (kDatarel | kSdata4)) return nullptr;
  const uint8_t* p = hdr + 4;
  uint64_t ignored, count;
  if ((ptr_enc & 0x0f) == kUleb128 || (ptr_enc & 0x0f) == kSleb128) return nullptr;
  if (ptr_enc != kOmit && !(p = read_format(ptr_enc, p, &ignored))) return nullptr;
  if (!(p = read_format(count_enc, p, &count)) || count == 0 || (uintptr_t(p) & 3)) return nullptr;

  struct Entry {
    int32_t loc, fde;
  };
  const Entry* table = reinterpret_cast<const Entry*>(p);
  const uintptr_t at = uintptr_t(pc), base = uintptr_t(hdr);
  auto loc = [&](uint64_t i) { return base + uintptr_t(intptr_t(table[i].loc)); };
  if (at < loc(0)) return nullptr;
  // The last entry whose location is at or before pc.
  uint64_t lo = 0, hi = count;
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (at < loc(mid)) hi = mid;
    else lo = mid;
  }
  const uint8_t* fde = reinterpret_cast<const uint8_t*>(base + uintptr_t(intptr_t(table[lo].fde)));
  const uint8_t enc = fde_encoding(fde);
  const int size = size_of(enc);
  uint64_t range;
  if (enc == kOmit || !size || !read_format(enc & 0x0f, fde + 8 + size, &range)) return nullptr;
  const uintptr_t func = loc(lo);
  if (at >= func + range) return nullptr;
  bases->tbase = nullptr;
  bases->dbase = nullptr;  // data-relative bases are i386's; none on x86-64 or aarch64
  bases->func = reinterpret_cast<void*>(func);
  return fde;
}

}  // namespace fde_lookup
