// gzip: wraps a byte buffer in one gzip member with zlib (see gzip.h).
// Not signal-safe: zlib and std::string allocate.
#include "gzip.h"

#include <zlib.h>

#include <algorithm>

namespace gzip {

namespace {

// zlib counts in uInt (32 bits), so both directions go through in steps.
constexpr size_t kStep = 256 * 1024;

bool fail(std::string* err, const char* what, int rc, z_stream* zs) {
  if (err) {
    *err = std::string("zlib ") + what + " failed (" + std::to_string(rc) + ")";
    if (zs->msg) *err += std::string(": ") + zs->msg;
  }
  return false;
}

// Runs deflate until the stream ends, feeding `in` and growing *out a step
// at a time. Z_FINISH is passed only once the last input step is handed over.
int run_deflate(z_stream* zs, const std::string& in, std::string* out) {
  size_t fed = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (zs->avail_in == 0 && fed < in.size()) {
      size_t n = std::min(kStep, in.size() - fed);
      zs->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + fed));
      zs->avail_in = static_cast<uInt>(n);
      fed += n;
    }
    size_t used = out->size();
    out->resize(used + kStep);
    zs->next_out = reinterpret_cast<Bytef*>(&(*out)[used]);
    zs->avail_out = static_cast<uInt>(kStep);
    rc = deflate(zs, fed == in.size() ? Z_FINISH : Z_NO_FLUSH);
    out->resize(used + kStep - zs->avail_out);
    if (rc != Z_OK && rc != Z_STREAM_END) return rc;
  }
  return rc;
}

}  // namespace

bool compress(const std::string& in, std::string* out, std::string* err) {
  z_stream zs{};
  // 16 + MAX_WBITS asks zlib for the gzip header and trailer, not zlib's own.
  int rc = deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  if (rc != Z_OK) return fail(err, "deflateInit2", rc, &zs);
  out->clear();
  out->reserve(deflateBound(&zs, in.size()));
  rc = run_deflate(&zs, in, out);
  if (rc != Z_STREAM_END) {
    fail(err, "deflate", rc, &zs);
    deflateEnd(&zs);
    return false;
  }
  rc = deflateEnd(&zs);
  if (rc != Z_OK) return fail(err, "deflateEnd", rc, &zs);
  return true;
}

}  // namespace gzip
