// symbolize_cache: what the images of a session have symbolized, kept on
// disk by build ID so that the next image that runs the same code reads its
// frames instead of looking them up again (a compiler run 80 times by a
// build symbolized libc from its debug file 80 times).
//
// One file per module, PROFILE_DIR/.profshim-symbols/BUILDID.sym: the frames
// of each address looked up so far (relative to the module's first mapping),
// and the witnesses of the lookup -- every file libdw's callbacks opened or
// looked for (the module's ELF, its debug file, the debuglink and build-ID
// candidates that were absent), with what stat() said of them. An entry is
// used only when its magic, version and checksum hold, it names the build
// ID it is filed under, every length in it is in bounds, and every witness
// still says the same: a debug package installed or removed since, a binary
// replaced, a truncated or corrupt file, and the entry is not used (the
// lookup is made afresh and the entry written again). Written as the
// profiles are: a temporary beside it, renamed over it; two images that
// write one at once each write a whole file and the last rename stands (the
// other's new addresses are looked up again by a later image).
// Not signal-safe: runs at the stop, on the stop's thread.
#pragma once
#include <stdint.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "symbolize.h"

namespace symbolize {
namespace cache {

// What stat() said of a path, or that there was nothing there.
struct Witness {
  std::string path;
  bool present = false;
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const Witness& o) const;
};
Witness observe(const std::string& path);

struct Entry {
  std::string build_id;              // raw bytes, as in the module's note
  std::vector<Witness> witnesses;    // sorted by path, one per path
  std::unordered_map<uint64_t, Result> results;  // by address - the module's first mapping
};

// An entry's first bytes; the version is part of them. An entry holds names
// as the shim spelled them, so a change of spelling is a new version too
// (3: Rust's v0 names, which version 2 left mangled).
constexpr char kEntryMagic[8] = {'P', 'S', 'S', 'Y', 'M', 'C', '3', '\n'};
// The files' checksum, eight bytes a step (byte-wise FNV-1a over a 2 MB
// symbol table cost a good part of what it saves): any one changed word
// changes it; it guards against damage, not against an adversary (the
// directory is this user's alone).
uint64_t checksum(const char* p, size_t n);

// Sorts the witnesses and keeps one per path (the first observed).
void normalize(std::vector<Witness>* w);

// The file's bytes, and back: false when anything is wrong with them.
std::string encode(const Entry& e);
bool decode(const std::string& bytes, Entry* out);

// Whether every witness still says what it said.
bool current(const Entry& e);
bool current(const std::vector<Witness>& w);

// An entry's bytes, checked whole as decode() checks them, its results
// indexed by address and unpacked one at a time (symbolize_entry.cc).
struct Parsed {
  std::string bytes, build_id;
  std::vector<Witness> witnesses;
  std::vector<std::pair<uint32_t, uint32_t>> strings;  // offset and length of each in bytes
  std::vector<std::pair<uint64_t, uint32_t>> index;    // address, offset of its result; sorted
  size_t strings_at = 0, results_at = 0;  // the first string; the results' count
  bool result(uint64_t addr, Result* out) const;
};
bool parse(std::string bytes, Parsed* out);
// An entry's bytes: old's (if any) with fresh's results that old lacks
// appended, under these witnesses.
std::string merge(const std::string& build_id, const std::vector<Witness>& witnesses, const Parsed* old,
                  const std::unordered_map<uint64_t, Result>& fresh);

// PROFILE_DIR/.profshim-symbols.
std::string dir_of(const std::string& profile_dir);

// PROFILE_DIR/.profshim-symbols, made if need be (create); "" and *path set
// when it is a directory of this user's that no one else may write to, ""
// alone when it is absent and not to be made, else why not.
std::string prepare_dir(const std::string& profile_dir, bool create, std::string* path);

// Once the program is in a Landlock domain (landlock.h), whose rules cannot
// be read back: a directory the cache cannot make (EACCES; xz 5.8 forbids
// itself new directories, not new files) is then taken as the sandbox's,
// and the cache is only not kept, with no error: it saves the next stop's
// work, the profiles are whole without it.
void note_sandboxed();

enum class Load { kAbsent, kUsed, kCorrupt, kStale };
// Reads and checks build_id's entry from dir.
Load load(const std::string& dir, const std::string& build_id, Entry* out);

// Writes e atomically under its build ID; "" or why not.
std::string store(const std::string& dir, const Entry& e);

// For the other files the cache keeps (symbolize_table.cc): witnesses in an
// entry's layout (get_* reads from *pos, bounds-checked, and moves it on);
// a whole regular file, not followed if a link (false, *absent when there
// is none); bytes written to dir/name through a temporary renamed into
// place ("" or why not).
void put_witnesses(std::string* out, const std::vector<Witness>& w);
bool get_witnesses(const std::string& in, size_t* pos, std::vector<Witness>* out);
bool read_whole(const std::string& path, std::string* out, bool* absent);
std::string write_whole(const std::string& dir, const std::string& name, const std::string& bytes);

}  // namespace cache
namespace internal {
struct ModInfo;
}
namespace cache {

// A Session's use of the cache: each module's entry read on first use, the
// addresses it then looked up with libdw, and those written back at flush().
class Store {
 public:
  explicit Store(const std::string& profile_dir) : profile_dir_(profile_dir) {}
  // The kept result of module m (its number in the Session, build_id its
  // own) for rel, its address relative to the module's first mapping; null
  // when there is none.
  const Result* find(size_t m, const std::string& build_id, uint64_t rel);
  // A result of module m looked up with libdw, to keep.
  void add(size_t m, uint64_t rel, const Result& r);
  void note_lookup(bool from_table = false) {
    ++stats_.looked_up;
    stats_.from_table += from_table;
  }
  // The cache directory, made if need be (create); "" when there is none
  // to use.
  const std::string& dir(bool create);
  // Each module's new results added to its entry as it is on disk now
  // (another image may have written it since it was read) if that entry was
  // made from the same files, else alone.
  void flush(const std::vector<std::unique_ptr<internal::ModInfo>>& mods);
  const CacheStats& stats() const { return stats_; }
  const std::string& error() const { return error_; }

 private:
  struct Module {
    bool asked = false, read = false, usable = false;
    Parsed entry;
    std::unordered_map<uint64_t, Result> hits, fresh;
  };
  std::string profile_dir_, dir_, error_;
  bool tried_ = false;
  bool made_ = false;  // dir(true) tried to make it
  std::vector<Module> mods_;
  CacheStats stats_;
};

}  // namespace cache
}  // namespace symbolize
