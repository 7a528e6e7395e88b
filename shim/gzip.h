// gzip: zlib gzip framing of a byte buffer. Knows nothing of files or protobuf.
#pragma once
#include <string>

namespace gzip {
// Compresses `in` into a complete gzip member in *out. False (with *err set)
// only if zlib itself fails.
bool compress(const std::string& in, std::string* out, std::string* err);
}  // namespace gzip
