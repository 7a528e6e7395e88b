// symbolize_wire: the fields of the symbol cache's files (entries, tables):
// little-endian integers and length-prefixed strings, appended to a string,
// and read back with every read bounds-checked, the first failure sticking.
// One reader and one writer for symbolize_cache.cc, symbolize_entry.cc and
// symbolize_table.cc.
#pragma once
#include <stdint.h>
#include <string.h>

#include <string>

namespace symbolize {
namespace wire {

inline void put(std::string* out, const void* p, size_t n) { out->append(static_cast<const char*>(p), n); }
inline void put8(std::string* out, uint8_t v) { put(out, &v, 1); }
inline void put32(std::string* out, uint32_t v) { put(out, &v, 4); }
inline void put64(std::string* out, uint64_t v) { put(out, &v, 8); }
inline void put_str(std::string* out, const std::string& s) {
  put32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

// Reads in[pos, end).
struct Reader {
  const std::string& in;
  size_t pos, end;
  bool ok = true;
  bool skip(size_t n) {
    if (!ok || pos > end || n > end - pos) return ok = false;
    pos += n;
    return true;
  }
  uint64_t get(size_t n) {  // n <= 8
    uint64_t v = 0;
    if (skip(n)) memcpy(&v, in.data() + pos - n, n);
    return v;
  }
  uint8_t u8() { return uint8_t(get(1)); }
  uint32_t u32() { return uint32_t(get(4)); }
  uint64_t u64() { return get(8); }
  std::string str() {
    const uint32_t n = u32();
    return skip(n) ? in.substr(pos - n, n) : std::string();
  }
  // A count of items of at least `size` bytes each that could still fit.
  uint32_t count(size_t size) {
    const uint64_t n = get(4);
    if (ok && n > (end - pos) / size) ok = false;
    return ok ? uint32_t(n) : 0;
  }
};

}  // namespace wire
}  // namespace symbolize
