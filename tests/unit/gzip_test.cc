// gzip_test: gzip::compress output is one gzip member that zlib inflates back;
// before gzip::load it refuses, saying why.
#include "gzip.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <string>

#include "check.h"

namespace {

// Inflates a gzip member (16 + MAX_WBITS: gzip framing only); false on error.
bool gunzip(const std::string& in, std::string* out) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return false;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  out->clear();
  int rc = Z_OK;
  char buf[65536];
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out->append(buf, sizeof buf - zs.avail_out);
  }
  bool whole = rc == Z_STREAM_END && zs.avail_in == 0;
  inflateEnd(&zs);
  return whole;
}

bool is_gzip(const std::string& z) {
  return z.size() >= 18 && static_cast<unsigned char>(z[0]) == 0x1f &&
         static_cast<unsigned char>(z[1]) == 0x8b;
}

void load() {
  std::string err;
  CHECK(gzip::load(&err));
  CHECK_EQ(err, std::string());
}

void round_trip(const std::string& in) {
  load();
  std::string z, err, back;
  CHECK(gzip::compress(in, &z, &err));
  CHECK_EQ(err, std::string());
  CHECK(is_gzip(z));
  CHECK(gunzip(z, &back));
  CHECK_EQ(back.size(), in.size());
  CHECK(back == in);
}

}  // namespace

// First in this file: the cases run in order, in one process.
TEST(before_load_compress_fails_and_says_why) {
  std::string z, err;
  CHECK(!gzip::compress("abc", &z, &err));
  CHECK(err.find("not loaded") != std::string::npos);
}

TEST(load_twice) {
  load();
  load();
}

TEST(empty) { round_trip(""); }

TEST(small) { round_trip("hello, profile"); }

// Several zlib steps in both directions, with incompressible and compressible
// stretches, so that the chunked feeding and draining is exercised.
TEST(five_megabytes) {
  std::string in;
  in.reserve(5 << 20);
  uint64_t x = 0x243f6a8885a308d3ULL;
  while (in.size() < (5u << 20)) {
    for (int i = 0; i < 4096; ++i) {  // xorshift noise
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      in.push_back(static_cast<char>(x));
    }
    in.append(4096, static_cast<char>('a' + in.size() % 26));
  }
  round_trip(in);
  std::string z, err;
  CHECK(gzip::compress(in, &z, &err));
  CHECK(z.size() < in.size() * 3 / 4);  // the repetitive half did compress
}

TEST(output_is_replaced_not_appended) {
  load();
  std::string z = "stale", err, back;
  CHECK(gzip::compress("abc", &z, &err));
  CHECK(is_gzip(z));
  CHECK(gunzip(z, &back));
  CHECK_EQ(back, std::string("abc"));
}

// The window is sized to the input: at every size around the steps, a
// second half that repeats the first (a match reaching back to the start)
// still round-trips and is found (the output is about half the input).
TEST(window_sized_to_the_input_reaches_back_to_the_start) {
  for (size_t n : {300, 511, 512, 513, 4095, 4097, 20000, 32768, 40000, 70000}) {
    std::string half;
    uint64_t x = 0x9e3779b97f4a7c15ULL ^ n;
    while (half.size() < n / 2) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      half.push_back(static_cast<char>(x));
    }
    const std::string in = half + half;
    round_trip(in);
    std::string z, err;
    CHECK(gzip::compress(in, &z, &err));
    // Random bytes cost a little over a byte each, the repeat a few bytes,
    // the header and trailer 18: not found, the output is the input's size.
    if (n + 262 <= 32768) CHECK(z.size() < in.size() * 11 / 20 + 40);
  }
  // A small input with a comment longer than it: the smallest window, the
  // header still whole.
  std::string z, err, back;
  const std::string note(600, 'n');
  CHECK(gzip::compress("ab", &z, &err, note));
  CHECK(gunzip(z, &back) && back == "ab");
}

// The header's comment carries an image's identity: written by compress,
// read back from the file's first bytes alone, and invisible to inflate.
TEST(header_comment_round_trip) {
  load();
  std::string z, err, back;
  const std::string note = "profshim session=1:2 pid=3 alt=run.x.3 exe=/usr/bin/a b";
  CHECK(gzip::compress(std::string(100000, 'x'), &z, &err, note));
  CHECK(gunzip(z, &back));
  CHECK_EQ(back, std::string(100000, 'x'));
  char path[] = "/tmp/gzip_test_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  CHECK(write(fd, z.data(), z.size()) == ssize_t(z.size()));
  close(fd);
  CHECK_EQ(gzip::header_comment(path), note);
  CHECK(gzip::compress("abc", &z, &err));  // none asked: none written
  fd = open(path, O_WRONLY | O_TRUNC);
  CHECK(write(fd, z.data(), z.size()) == ssize_t(z.size()));
  close(fd);
  CHECK_EQ(gzip::header_comment(path), std::string());
  unlink(path);
  CHECK_EQ(gzip::header_comment("/nonexistent/x.gz"), std::string());
  CHECK_EQ(gzip::header_comment("/proc/self/status"), std::string());
}
