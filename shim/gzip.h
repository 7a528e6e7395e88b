// gzip: zlib gzip framing of a byte buffer. Knows nothing of files or protobuf.
#pragma once
#include <string>

namespace gzip {
// dlopen()s zlib (RTLD_LOCAL) and resolves what compress uses. Called at
// setup when profiling is active, so an inert process never maps libz and a
// missing zlib is a setup error, not a lost profile at the stop. False with
// *err set if zlib is not usable; true at once if already loaded.
bool load(std::string* err);

// Compresses `in` into a complete gzip member in *out. False (with *err set)
// if zlib is not loaded or fails.
bool compress(const std::string& in, std::string* out, std::string* err);
}  // namespace gzip
