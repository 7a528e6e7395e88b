// gzip: zlib gzip framing of a byte buffer. Knows nothing of files or protobuf.
#pragma once
#include <stdint.h>

#include <string>

namespace gzip {
// dlopen()s zlib (RTLD_LOCAL) and resolves what compress uses. Called at
// setup when profiling is active, so an inert process never maps libz and a
// missing zlib is a setup error, not a lost profile at the stop. False with
// *err set if zlib is not usable; true at once if already loaded.
bool load(std::string* err);

// Compresses `in` into a complete gzip member in *out, with `comment` (if
// not empty) as the gzip header's comment (RFC 1952 FCOMMENT: readers such
// as Go's gzip.Reader skip it). False (with *err set) if zlib is not loaded
// or fails.
bool compress(const std::string& in, std::string* out, std::string* err, const std::string& comment = "");

// The header comment of the gzip file at path, "" if it has none or is not
// a regular gzip file. Reads the first 4 KiB only, never blocks (a FIFO is
// not opened for reading), follows no symbolic link.
std::string header_comment(const std::string& path);

// Inflates the zlib stream at [off, off + len) of file in, appending it to
// out (at its file position): true when the stream ended there and made
// exactly `want` bytes. Memory: two 64 KiB buffers and zlib's window.
bool inflate_file(int in, uint64_t off, uint64_t len, int out, uint64_t want);
}  // namespace gzip
