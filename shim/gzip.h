// gzip: zlib gzip framing of a byte buffer. Knows nothing of files or protobuf.
#pragma once
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
}  // namespace gzip
