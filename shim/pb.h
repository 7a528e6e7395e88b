// pb: a schema-free protobuf wire-format writer that appends to a std::string.
// It knows varints, tags, scalar/bytes/packed fields and nested lengths, and
// nothing about which message or field number means what (pprof.cc does).
// Not signal-safe: it allocates.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pb {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

void varint(std::string* out, uint64_t v);
void tag(std::string* out, uint32_t field, WireType wt);

// Scalar fields are skipped when equal to their proto3 default (0 / false):
// a reader sees exactly the same message, and profiles get smaller.
void uint64_field(std::string* out, uint32_t field, uint64_t v);
void int64_field(std::string* out, uint32_t field, int64_t v);
void bool_field(std::string* out, uint32_t field, bool v);

// Always written, even when empty, because repeated strings (string_table,
// whose entry 0 must be "") lose their position if an empty one is skipped.
void bytes_field(std::string* out, uint32_t field, const std::string& v);

// Packed repeated fields; nothing is written for an empty list.
void packed_uint64(std::string* out, uint32_t field, const std::vector<uint64_t>& v);
void packed_int64(std::string* out, uint32_t field, const std::vector<int64_t>& v);

// A nested message: start_message() writes the tag and reserves the length,
// the caller appends the body, commit_message() patches the length in.
// Only the child's own bytes move when the length needs more than one byte,
// so nesting costs O(depth * size), i.e. linear for profile.proto's depth.
struct Mark { size_t len_pos; };
Mark start_message(std::string* out, uint32_t field);
void commit_message(std::string* out, Mark m);

}  // namespace pb
