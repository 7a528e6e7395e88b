// pb: protobuf wire-format primitives (see pb.h); no schema knowledge here.
#include "pb.h"

namespace pb {

namespace {

size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) { v >>= 7; ++n; }
  return n;
}

// Writes the varint at out[pos..pos+varint_size(v)), which must exist.
void put_varint_at(std::string* out, size_t pos, uint64_t v) {
  while (v >= 0x80) {
    (*out)[pos++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  (*out)[pos] = static_cast<char>(v);
}

}  // namespace

void varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void tag(std::string* out, uint32_t field, WireType wt) {
  varint(out, (static_cast<uint64_t>(field) << 3) | wt);
}

void uint64_field(std::string* out, uint32_t field, uint64_t v) {
  if (v == 0) return;
  tag(out, field, kVarint);
  varint(out, v);
}

// int64 (not sint64) in profile.proto: negatives are their two's-complement
// 64-bit pattern, ten bytes on the wire.
void int64_field(std::string* out, uint32_t field, int64_t v) {
  uint64_field(out, field, static_cast<uint64_t>(v));
}

void bool_field(std::string* out, uint32_t field, bool v) {
  uint64_field(out, field, v ? 1 : 0);
}

void bytes_field(std::string* out, uint32_t field, const std::string& v) {
  tag(out, field, kLen);
  varint(out, v.size());
  out->append(v);
}

void packed_uint64(std::string* out, uint32_t field, const std::vector<uint64_t>& v) {
  if (v.empty()) return;
  size_t len = 0;
  for (uint64_t x : v) len += varint_size(x);
  tag(out, field, kLen);
  varint(out, len);
  for (uint64_t x : v) varint(out, x);
}

void packed_int64(std::string* out, uint32_t field, const std::vector<int64_t>& v) {
  if (v.empty()) return;
  size_t len = 0;
  for (int64_t x : v) len += varint_size(static_cast<uint64_t>(x));
  tag(out, field, kLen);
  varint(out, len);
  for (int64_t x : v) varint(out, static_cast<uint64_t>(x));
}

Mark start_message(std::string* out, uint32_t field) {
  tag(out, field, kLen);
  Mark m{out->size()};
  out->push_back('\0');  // one byte fits most bodies (< 128 bytes)
  return m;
}

void commit_message(std::string* out, Mark m) {
  uint64_t len = out->size() - m.len_pos - 1;
  size_t need = varint_size(len);
  if (need > 1) out->insert(m.len_pos + 1, need - 1, '\0');
  put_varint_at(out, m.len_pos, len);
}

}  // namespace pb
