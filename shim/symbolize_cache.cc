// symbolize_cache: see symbolize_cache.h. The format is the shim's own, read
// only by the shim of the same version (a version of another layout is a
// corrupt entry, never a guess):
//   "PSSYMC3\n", u32 build ID length, build ID,
//   u32 witnesses, each: str path, u8 present, u64 dev ino size, i64 mtime ctime,
//   u32 strings, each: str,
//   u32 results, each: u64 address, u8 inlines_known, u32 frames,
//     each frame: u32 name, u32 system_name, u32 file (string numbers), i64 line, i64 start_line,
//   u64 checksum() of everything before it.
// The results are in no particular order (an entry grows by appending:
// symbolize_entry.cc), one per address.
// str: u32 length, bytes. Integers little-endian, as the machine writes them.
#include "symbolize_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "fsroot.h"
#include "symbolize_internal.h"
#include "symbolize_wire.h"
#include "sys.h"

namespace symbolize {
namespace cache {
namespace {

constexpr size_t kMaxFile = size_t(64) << 20;  // a file past this is not ours, or not sane
constexpr size_t kMaxResults = 200000;         // an entry stops growing here
constexpr char kDirName[] = ".profshim-symbols";
bool g_sandboxed = false;  // note_sandboxed(): set once, as a Landlock domain is never left


int64_t ns(const struct timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }

std::string entry_path(const std::string& dir, const std::string& build_id) {
  return dir + "/" + internal::hex(build_id) + ".sym";
}

}  // namespace

bool read_whole(const std::string& path, std::string* out, bool* absent) {
  int fd = fsroot::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  *absent = fd < 0 && errno == ENOENT;
  if (fd < 0) return false;
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && size_t(st.st_size) <= kMaxFile;
  if (ok) {
    out->resize(size_t(st.st_size));
    size_t got = 0;
    while (got < out->size()) {
      ssize_t r = read(fd, &(*out)[got], out->size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += size_t(r);
    }
    ok = got == out->size();
  }
  close(fd);
  return ok;
}

bool Witness::operator==(const Witness& o) const {
  return path == o.path && present == o.present && dev == o.dev && ino == o.ino && size == o.size &&
         mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
}

Witness observe(const std::string& path) {
  Witness w;
  w.path = path;
  struct stat st;
  if (fsroot::stat(path.c_str(), &st) != 0) return w;
  w.present = true;
  w.dev = st.st_dev, w.ino = st.st_ino, w.size = uint64_t(st.st_size);
  w.mtime_ns = ns(st.st_mtim), w.ctime_ns = ns(st.st_ctim);
  return w;
}

void normalize(std::vector<Witness>* w) {
  std::stable_sort(w->begin(), w->end(), [](const Witness& a, const Witness& b) { return a.path < b.path; });
  w->erase(std::unique(w->begin(), w->end(), [](const Witness& a, const Witness& b) { return a.path == b.path; }),
           w->end());
}

void put_witnesses(std::string* out, const std::vector<Witness>& ws) {
  wire::put32(out, static_cast<uint32_t>(ws.size()));
  for (const Witness& x : ws) {
    wire::put_str(out, x.path);
    wire::put8(out, x.present);
    wire::put64(out, x.dev), wire::put64(out, x.ino), wire::put64(out, x.size);
    wire::put64(out, uint64_t(x.mtime_ns)), wire::put64(out, uint64_t(x.ctime_ns));
  }
}

bool get_witnesses(const std::string& in, size_t* pos, std::vector<Witness>* out) {
  wire::Reader r{in, *pos, in.size()};
  for (uint32_t n = r.count(4 + 1 + 5 * 8); n-- > 0 && r.ok;) {
    Witness w;
    w.path = r.str();
    w.present = r.u8() != 0;
    w.dev = r.u64(), w.ino = r.u64(), w.size = r.u64();
    w.mtime_ns = int64_t(r.u64()), w.ctime_ns = int64_t(r.u64());
    out->push_back(std::move(w));
  }
  *pos = r.pos;
  return r.ok;
}

uint64_t checksum(const char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 0x100000001b3ull;
  return h;
}

std::string encode(const Entry& e) { return merge(e.build_id, e.witnesses, nullptr, e.results); }

bool decode(const std::string& bytes, Entry* out) {
  Parsed p;
  if (!parse(bytes, &p)) return false;
  Entry e;
  e.build_id = p.build_id;
  e.witnesses = p.witnesses;
  for (const auto& x : p.index) p.result(x.first, &e.results[x.first]);
  *out = std::move(e);
  return true;
}

bool current(const std::vector<Witness>& ws) {
  for (const Witness& w : ws)
    if (!(observe(w.path) == w)) return false;
  return true;
}

bool current(const Entry& e) { return current(e.witnesses); }

void note_sandboxed() { __atomic_store_n(&g_sandboxed, true, __ATOMIC_RELAXED); }

std::string dir_of(const std::string& profile_dir) { return profile_dir + "/" + kDirName; }

std::string prepare_dir(const std::string& profile_dir, bool create, std::string* path) {
  const std::string dir = dir_of(profile_dir);
  if (create && fsroot::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    if (errno == EACCES && __atomic_load_n(&g_sandboxed, __ATOMIC_RELAXED)) return "";
    return "cannot create " + dir + ": " + strerror(errno);
  }
  // Not followed if it is a link, nor used if someone else could plant
  // entries in it.
  struct stat st;
  if (fsroot::lstat(dir.c_str(), &st) != 0) return create || errno != ENOENT ? "cannot use " + dir + ": " + strerror(errno) : "";
  if (!S_ISDIR(st.st_mode)) return "not using " + dir + ": not a directory";
  if (st.st_uid != geteuid() || (st.st_mode & 022))
    return "not using " + dir + ": another user owns it or may write to it";
  *path = dir;
  return "";
}

Load load(const std::string& dir, const std::string& build_id, Entry* out) {
  std::string bytes;
  bool absent = false;
  if (!read_whole(entry_path(dir, build_id), &bytes, &absent)) return absent ? Load::kAbsent : Load::kCorrupt;
  Entry e;
  if (!decode(bytes, &e) || e.build_id != build_id) return Load::kCorrupt;
  if (!current(e)) return Load::kStale;
  *out = std::move(e);
  return Load::kUsed;
}

std::string store(const std::string& dir, const Entry& e) {
  if (e.build_id.empty() || e.results.size() > kMaxResults) return "";
  return write_whole(dir, internal::hex(e.build_id) + ".sym", encode(e));
}

std::string write_whole(const std::string& dir, const std::string& name, const std::string& bytes) {
  const std::string target = dir + "/" + name;
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r) r = uint64_t(getpid()) * 0x9e3779b97f4a7c15ull;
  char suffix[64];
  snprintf(suffix, sizeof suffix, ".tmp.%d.%016llx", int(getpid()), static_cast<unsigned long long>(r));
  const std::string tmp = dir + "/." + name + suffix;
  int fd = fsroot::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + tmp + ": " + strerror(errno);
  size_t off = 0, room = sys::fsize_room(fd);
  int err = 0;
  while (off < bytes.size()) {
    if (off >= room) {
      err = EFBIG;
      break;
    }
    size_t n = bytes.size() - off < room - off ? bytes.size() - off : room - off;
    ssize_t w = write(fd, bytes.data() + off, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : ENOSPC;
      break;
    }
    off += size_t(w);
  }
  if (close(fd) != 0 && !err) err = errno;
  if (!err && fsroot::rename(tmp.c_str(), target.c_str()) != 0) err = errno;
  if (err) {
    fsroot::unlink(tmp.c_str());
    return "cannot write " + target + ": " + strerror(err);
  }
  return "";
}

const std::string& Store::dir(bool create) {
  if (profile_dir_.empty()) return dir_;
  if (!tried_) {  // read from it if it is there; made only to write to it
    tried_ = true;
    error_ = prepare_dir(profile_dir_, false, &dir_);
  }
  // Made once at most: a directory the program's sandbox refused stays so.
  if (create && dir_.empty() && error_.empty() && !made_) {
    made_ = true;
    error_ = prepare_dir(profile_dir_, true, &dir_);
  }
  return dir_;
}

const Result* Store::find(size_t m, const std::string& build_id, uint64_t rel) {
  if (profile_dir_.empty()) return nullptr;
  dir(false);
  if (mods_.size() <= m) mods_.resize(m + 1);
  Module& k = mods_[m];
  k.asked = true;
  if (!k.read && !dir_.empty()) {
    k.read = true;
    std::string bytes;
    bool absent = false;
    if (read_whole(entry_path(dir_, build_id), &bytes, &absent)) {
      k.usable = parse(std::move(bytes), &k.entry) && k.entry.build_id == build_id && current(k.entry.witnesses);
      stats_.rejected += !k.usable;
    } else if (!absent) {
      ++stats_.rejected;
    }
    if (!k.usable) k.entry = Parsed();
  }
  auto hit = k.hits.find(rel);
  if (hit == k.hits.end()) {
    Result r;
    if (!k.entry.result(rel, &r)) return nullptr;
    hit = k.hits.emplace(rel, std::move(r)).first;
  }
  ++stats_.cached;
  return &hit->second;
}

void Store::add(size_t m, uint64_t rel, const Result& r) {
  if (m < mods_.size() && error_.empty()) mods_[m].fresh.emplace(rel, r);
}

void Store::flush(const std::vector<std::unique_ptr<internal::ModInfo>>& mods) {
  for (size_t m = 0; m < mods_.size() && m < mods.size(); ++m) {
    Module& k = mods_[m];
    const internal::ModInfo& mi = *mods[m];
    // Its symbols, if libdw loaded them (a module asked of the cache: one
    // that can be kept).
    if (k.asked && mi.syms_loaded && !mi.syms_from_table && !dir(true).empty())
      internal::table_to_cache(dir_, mi.low, mi);
    if (k.fresh.empty() || !mi.cache_ok) continue;
    if (dir(true).empty()) return;
    std::vector<Witness> now = mi.witnesses;
    normalize(&now);
    // The entry as it is on disk now: the one read, unless another image
    // has written it since.
    std::string bytes;
    bool absent = false, have = false;
    Parsed disk;
    if (read_whole(entry_path(dir_, mi.build_id), &bytes, &absent)) {
      if (k.usable && bytes == k.entry.bytes)
        disk = std::move(k.entry), have = true;
      else
        have = parse(std::move(bytes), &disk) && disk.build_id == mi.build_id && current(disk.witnesses);
    }
    have = have && disk.witnesses == now;
    if ((have ? disk.index.size() : 0) + k.fresh.size() > kMaxResults) continue;
    const std::string err = write_whole(dir_, internal::hex(mi.build_id) + ".sym",
                                        merge(mi.build_id, now, have ? &disk : nullptr, k.fresh));
    k.fresh.clear();
    if (err.empty())
      ++stats_.stored;
    else if (error_.empty())
      error_ = err;
  }
}

}  // namespace cache
}  // namespace symbolize
