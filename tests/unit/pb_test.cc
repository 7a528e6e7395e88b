// pb_test: the protobuf writer emits exactly the bytes the wire format defines.
#include "pb.h"

#include <cstdint>
#include <string>

#include "check.h"

namespace {

std::string bytes(std::initializer_list<unsigned> b) {
  std::string s;
  for (unsigned c : b) s.push_back(static_cast<char>(c));
  return s;
}

std::string varint_of(uint64_t v) {
  std::string s;
  pb::varint(&s, v);
  return s;
}

}  // namespace

TEST(varints) {
  CHECK_EQ(varint_of(0), bytes({0x00}));
  CHECK_EQ(varint_of(1), bytes({0x01}));
  CHECK_EQ(varint_of(127), bytes({0x7f}));
  CHECK_EQ(varint_of(128), bytes({0x80, 0x01}));
  CHECK_EQ(varint_of(300), bytes({0xac, 0x02}));
  CHECK_EQ(varint_of(UINT64_MAX),
           bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
}

TEST(tags) {
  std::string s;
  pb::tag(&s, 1, pb::kVarint);
  pb::tag(&s, 2, pb::kLen);
  pb::tag(&s, 16, pb::kVarint);  // first field number that needs two bytes
  CHECK_EQ(s, bytes({0x08, 0x12, 0x80, 0x01}));
}

TEST(scalar_fields_skip_defaults) {
  std::string s;
  pb::uint64_field(&s, 1, 0);
  pb::int64_field(&s, 2, 0);
  pb::bool_field(&s, 3, false);
  CHECK_EQ(s, std::string());
  pb::uint64_field(&s, 1, 150);
  pb::bool_field(&s, 7, true);
  CHECK_EQ(s, bytes({0x08, 0x96, 0x01, 0x38, 0x01}));
}

TEST(negative_int64_is_ten_bytes) {
  std::string s;
  pb::int64_field(&s, 2, -1);
  CHECK_EQ(s, bytes({0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
}

TEST(string_fields) {
  std::string s;
  pb::bytes_field(&s, 6, "");  // kept: string_table[0] is ""
  pb::bytes_field(&s, 6, "testing");
  CHECK_EQ(s, bytes({0x32, 0x00, 0x32, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}));
}

TEST(packed_fields) {
  std::string s;
  pb::packed_uint64(&s, 1, {});
  CHECK_EQ(s, std::string());
  pb::packed_uint64(&s, 1, {3, 270, 86942});
  CHECK_EQ(s, bytes({0x0a, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05}));
  s.clear();
  pb::packed_int64(&s, 2, {1, -1});
  CHECK_EQ(s, bytes({0x12, 0x0b, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                     0xff, 0x01}));
}

TEST(nested_message) {
  std::string s;
  pb::Mark outer = pb::start_message(&s, 4);
  pb::uint64_field(&s, 1, 1);
  pb::Mark inner = pb::start_message(&s, 4);
  pb::uint64_field(&s, 1, 2);
  pb::int64_field(&s, 2, 42);
  pb::commit_message(&s, inner);
  pb::commit_message(&s, outer);
  CHECK_EQ(s, bytes({0x22, 0x08, 0x08, 0x01, 0x22, 0x04, 0x08, 0x02, 0x10, 0x2a}));
}

TEST(empty_nested_message) {
  std::string s;
  pb::commit_message(&s, pb::start_message(&s, 11));
  CHECK_EQ(s, bytes({0x5a, 0x00}));
}

// A body of 200 bytes needs a two-byte length, so the body must shift by one.
TEST(nested_message_long_body) {
  std::string s;
  pb::Mark m = pb::start_message(&s, 2);
  std::string body(197, 'x');
  pb::bytes_field(&s, 1, body);  // 1 tag + 2 length + 197 = 200 bytes
  pb::commit_message(&s, m);
  std::string want = bytes({0x12, 0xc8, 0x01, 0x0a, 0xc5, 0x01}) + body;
  CHECK_EQ(s, want);
  CHECK_EQ(s.size(), size_t(203));
}

// 1e5 nested messages must be linear: only the child's bytes ever move.
TEST(many_nested_messages) {
  std::string s;
  for (int i = 0; i < 100000; ++i) {
    pb::Mark m = pb::start_message(&s, 2);
    pb::packed_uint64(&s, 1, {uint64_t(i), uint64_t(i) + 1});
    pb::commit_message(&s, m);
  }
  CHECK(s.size() > 100000 * 5);
  CHECK_EQ(static_cast<unsigned char>(s[0]), 0x12u);
}
