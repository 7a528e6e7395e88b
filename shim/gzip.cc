// gzip: wraps a byte buffer in one gzip member with zlib (see gzip.h), and
// inflates a zlib stream from file to file (a compressed debug section).
// Not signal-safe: zlib and std::string allocate.
#include "gzip.h"
#include "fsroot.h"
#include "real.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <errno.h>

#include <algorithm>
#include <memory>

namespace gzip {

namespace {

// zlib through dlopen, never a DT_NEEDED of the shim: an inert process maps
// nothing of it (docs/DESIGN.md). Only the types and constants of zlib.h are
// used at compile time; deflateInit2 is a macro over deflateInit2_.
struct Zlib {
  int (*deflateInit2_)(z_streamp, int, int, int, int, int, const char*, int);
  int (*deflate)(z_streamp, int);
  int (*deflateEnd)(z_streamp);
  uLong (*deflateBound)(z_streamp, uLong);
  int (*deflateSetHeader)(z_streamp, gz_headerp);
  // For inflate_file (a compressed debug section); optional: without them
  // only that is refused.
  int (*inflateInit_)(z_streamp, const char*, int);
  int (*inflate)(z_streamp, int);
  int (*inflateEnd)(z_streamp);
};
Zlib g_z;
bool g_loaded = false;

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
// at a time (the first step deflateBound's, which holds the whole output of
// a small profile: a 256 KiB step was 256 KiB zeroed for 500 bytes). Z_FINISH
// is passed only once the last input step is handed over.
int run_deflate(z_stream* zs, const std::string& in, std::string* out) {
  size_t fed = 0;
  int rc = Z_OK;
  size_t step = std::min<size_t>(kStep, g_z.deflateBound(zs, in.size()));
  while (rc != Z_STREAM_END) {
    if (zs->avail_in == 0 && fed < in.size()) {
      size_t n = std::min(kStep, in.size() - fed);
      zs->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + fed));
      zs->avail_in = static_cast<uInt>(n);
      fed += n;
    }
    size_t used = out->size();
    out->resize(used + step);
    zs->next_out = reinterpret_cast<Bytef*>(&(*out)[used]);
    zs->avail_out = static_cast<uInt>(step);
    rc = g_z.deflate(zs, fed == in.size() ? Z_FINISH : Z_NO_FLUSH);
    out->resize(used + step - zs->avail_out);
    step = kStep;
    if (rc != Z_OK && rc != Z_STREAM_END) return rc;
  }
  return rc;
}

}  // namespace

bool load(std::string* err) {
  if (g_loaded) return true;
  // RTLD_DEEPBIND: zlib's calls to its own functions (deflateInit2_ calls
  // deflateReset through its PLT) bind inside libz, not to a program's
  // executable that exports a zlib of its own (node links Chromium's zlib
  // in and exports it: its deflateReset on our libz's state crashed the
  // stop). zlib allocates only through zalloc/zfree, set to the shim's
  // malloc in compress, so deep binding never reaches libc's malloc.
  void* h = real::dlopen()("libz.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) {
    if (err) *err = std::string("cannot load libz.so.1 (Debian package zlib1g): ") + dlerror();
    return false;
  }
  Zlib z;
  z.deflateInit2_ = reinterpret_cast<decltype(z.deflateInit2_)>(dlsym(h, "deflateInit2_"));
  z.deflate = reinterpret_cast<decltype(z.deflate)>(dlsym(h, "deflate"));
  z.deflateEnd = reinterpret_cast<decltype(z.deflateEnd)>(dlsym(h, "deflateEnd"));
  z.deflateBound = reinterpret_cast<decltype(z.deflateBound)>(dlsym(h, "deflateBound"));
  z.deflateSetHeader = reinterpret_cast<decltype(z.deflateSetHeader)>(dlsym(h, "deflateSetHeader"));
  z.inflateInit_ = reinterpret_cast<decltype(z.inflateInit_)>(dlsym(h, "inflateInit_"));
  z.inflate = reinterpret_cast<decltype(z.inflate)>(dlsym(h, "inflate"));
  z.inflateEnd = reinterpret_cast<decltype(z.inflateEnd)>(dlsym(h, "inflateEnd"));
  if (!z.deflateInit2_ || !z.deflate || !z.deflateEnd || !z.deflateBound || !z.deflateSetHeader) {
    if (err) *err = "libz.so.1 lacks deflateInit2_, deflate, deflateEnd, deflateBound or deflateSetHeader";
    dlclose(h);
    return false;
  }
  g_z = z;
  g_loaded = true;
  return true;
}

bool compress(const std::string& in, std::string* out, std::string* err, const std::string& comment) {
  if (!g_loaded) {
    if (err) *err = "zlib is not loaded (gzip::load was not called at setup)";
    return false;
  }
  z_stream zs{};
  zs.zalloc = [](voidpf, uInt n, uInt size) -> voidpf { return calloc(n, size); };
  zs.zfree = [](voidpf, voidpf p) { free(p); };
  // A window as large as the input and zlib's 262-byte lookahead (which its
  // reach leaves out) reaches every match a 32 KiB one would: none reaches
  // back past the start. zlib allocates and clears its tables by the
  // window's size and memLevel: ~260 KiB for a profile of 500 bytes at the
  // defaults. The hash shrinks with the window (a slightly worse match
  // search on inputs of a few KiB: bytes, not worth a page).
  int bits = 9;  // zlib's smallest for gzip
  while (bits < MAX_WBITS && (size_t(1) << bits) < in.size() + 262) ++bits;
  const int mem_level = std::max(1, std::min(8, bits - 7));
  // 16 + bits asks zlib for the gzip header and trailer, not zlib's own.
  // Level 1, as Go's runtime/pprof: a third of level 6's time on a
  // compiler's profiles for files ~10% larger.
  int rc = g_z.deflateInit2_(&zs, Z_BEST_SPEED, Z_DEFLATED, 16 + bits, mem_level, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                             int(sizeof(z_stream)));
  if (rc != Z_OK) return fail(err, "deflateInit2", rc, &zs);
  gz_header head{};
  head.os = 3;  // Unix
  head.comment = reinterpret_cast<Bytef*>(const_cast<char*>(comment.c_str()));
  if (!comment.empty() && (rc = g_z.deflateSetHeader(&zs, &head)) != Z_OK) {
    fail(err, "deflateSetHeader", rc, &zs);
    g_z.deflateEnd(&zs);
    return false;
  }
  out->clear();
  rc = run_deflate(&zs, in, out);
  if (rc != Z_STREAM_END) {
    fail(err, "deflate", rc, &zs);
    g_z.deflateEnd(&zs);
    return false;
  }
  rc = g_z.deflateEnd(&zs);
  if (rc != Z_OK) return fail(err, "deflateEnd", rc, &zs);
  return true;
}

std::string header_comment(const std::string& path) {
  int fd = fsroot::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st;
  unsigned char b[4096];
  ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, b, sizeof b, 0) : -1;
  close(fd);
  // RFC 1952: ID1 ID2 CM FLG MTIME(4) XFL OS, then the optional fields in
  // the order FEXTRA, FNAME, FCOMMENT.
  if (n < 10 || b[0] != 0x1f || b[1] != 0x8b || b[2] != 8 || !(b[3] & 0x10)) return "";
  size_t at = 10;
  if (b[3] & 0x04) {
    if (size_t(n) < at + 2) return "";
    at += 2 + (b[at] | (size_t(b[at + 1]) << 8));
  }
  if (b[3] & 0x08)
    while (at < size_t(n) && b[at++] != 0) {
    }
  size_t start = at;
  while (at < size_t(n) && b[at] != 0) ++at;
  if (at >= size_t(n)) return "";  // no end within the first 4 KiB
  return std::string(reinterpret_cast<char*>(b + start), at - start);
}

// A step at a time both ways (64 KiB in, 64 KiB out), so a section of any
// size costs the stop 128 KiB of memory, not its inflated size.
bool inflate_file(int in, uint64_t off, uint64_t len, int out, uint64_t want) {
  if (!g_loaded || !g_z.inflateInit_ || !g_z.inflate || !g_z.inflateEnd) return false;
  z_stream zs{};
  zs.zalloc = [](voidpf, uInt n, uInt size) -> voidpf { return calloc(n, size); };
  zs.zfree = [](voidpf, voidpf p) { free(p); };
  if (g_z.inflateInit_(&zs, ZLIB_VERSION, int(sizeof zs)) != Z_OK) return false;
  constexpr size_t kChunk = 64 * 1024;
  std::unique_ptr<unsigned char[]> ibuf(new unsigned char[kChunk]), obuf(new unsigned char[kChunk]);
  uint64_t done_in = 0, done_out = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (zs.avail_in == 0) {
      if (done_in == len) break;  // the input ended before the stream did
      const size_t want_in = size_t(std::min<uint64_t>(kChunk, len - done_in));
      ssize_t n = pread(in, ibuf.get(), want_in, off_t(off + done_in));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done_in += uint64_t(n);
      zs.next_in = ibuf.get();
      zs.avail_in = uInt(n);
    }
    zs.next_out = obuf.get();
    zs.avail_out = uInt(kChunk);
    rc = g_z.inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    const size_t got = kChunk - zs.avail_out;
    if (got > want - done_out) break;  // more than the header said
    for (size_t w = 0; w < got;) {
      ssize_t n = write(out, obuf.get() + w, got - w);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        g_z.inflateEnd(&zs);
        return false;
      }
      w += size_t(n);
    }
    done_out += got;
  }
  g_z.inflateEnd(&zs);
  return rc == Z_STREAM_END && done_out == want;
}

}  // namespace gzip
