// symbolize_files: the files behind libdwfl's modules — a module's own ELF
// file and its separate debug file — found on this machine only, never over
// the network, and used only when their build ID is the one in memory.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fsroot.h"
#include "symbolize_internal.h"

namespace symbolize {
namespace internal {

namespace {

// The files a module's frames came from, and the places found empty, as the
// symbol cache checks them (symbolize_cache.h).
void witness(ModInfo* mi, const std::string& path) {
  if (mi) mi->witnesses.push_back(cache::observe(path));
}

// An open() that failed for a reason of the moment, not of the file system:
// what the module's lookup finds now is not what it would find.
void note_failed_open(ModInfo* mi) {
  if (mi && errno != ENOENT && errno != ENOTDIR) mi->cache_ok = false;
}

// Where libdwfl looks for a debug file by build ID, given our debuginfo path.
std::string build_id_debug_path(const std::string& build_id) {
  const std::string h = hex(build_id);
  return h.size() < 4 ? std::string() : "/usr/lib/debug/.build-id/" + h.substr(0, 2) + "/" + h.substr(2) + ".debug";
}

bool same_build_id(Elf* elf, const std::string& want) {
  if (want.empty()) return true;  // nothing to check against
  const void* p = nullptr;
  ssize_t n = dw().dwelf_elf_gnu_build_id(elf, &p);
  return n == static_cast<ssize_t>(want.size()) && std::memcmp(p, want.data(), n) == 0;
}

// Opens path for reading only if it is a regular file, without blocking: a
// FIFO (or a device) planted where a binary or its debug file should be
// would block open() or read() until the stop gave up, and a file with a
// lease would block open() until the lease was broken. -1 otherwise.
int open_regular(const char* path, ModInfo* mi) {
  int fd = fsroot::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    note_failed_open(mi);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -1;
  }
  // Regular files ignore O_NONBLOCK; cleared all the same, for libelf.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// The file behind a module: by its path; when maps says it was deleted (an
// upgrade replaced it), through /proc/self/map_files, which still reaches the
// mapped inode (opening it takes CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE;
// without them the module just stays unnamed).
int open_module_file(ModInfo& mi, std::string* name) {
  static const char kDeleted[] = " (deleted)";
  const size_t n = sizeof kDeleted - 1;
  const std::string& p = mi.path;
  if (p.size() > n && p.compare(p.size() - n, n, kDeleted) == 0) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "/proc/self/map_files/%llx-%llx",
                  static_cast<unsigned long long>(mi.map_start),
                  static_cast<unsigned long long>(mi.map_end));
    *name = p.substr(0, p.size() - n);
    return open_regular(buf, &mi);
  }
  *name = p;
  return open_regular(p.c_str(), &mi);
}

// Dwfl_Callbacks.find_elf. A file is used only if its build ID is the one in
// memory, so a binary rebuilt or replaced on disk never lends its names.
int find_elf(Dwfl_Module*, void** userdata, const char*, Dwarf_Addr, char** file_name,
             Elf** elfp) {
  auto* mi = userdata ? static_cast<ModInfo*>(*userdata) : nullptr;
  if (!mi) return -1;
  if (mi->vdso) {  // the kernel's image: a copy, so libelf never sees it change
    mi->image.assign(reinterpret_cast<const char*>(mi->low), reinterpret_cast<const char*>(mi->high));
    *elfp = dw().elf_memory(mi->image.data(), mi->image.size());
    return -1;
  }
  std::string name;
  int fd = open_module_file(*mi, &name);
  witness(mi, name);
  if (fd < 0) return -1;
  Elf* elf = dw().elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (!elf || !same_build_id(elf, mi->build_id)) {
    if (elf) dw().elf_end(elf);
    close(fd);
    return -1;
  }
  // A binary that carries its DWARF compressed (Go's, one built -gz):
  // libdw would inflate all of it into the stop's memory (6 MiB for a small
  // cgo program); its inflated copy in the symbol cache is mapped instead,
  // and only the pages read count.
  const int was = fd;
  fd = use_inflated(fd, mi, ".elf");
  if (fd != was) {
    dw().elf_end(elf);
    elf = dw().elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    if (!elf || !same_build_id(elf, mi->build_id)) {
      if (elf) dw().elf_end(elf);
      close(fd);
      return -1;
    }
  }
  *elfp = elf;
  *file_name = strdup(name.c_str());
  return fd;
}

// Opens dir/link if it is a debug file for this module: not the module's own
// file under another name, and carrying the module's build ID.
int open_debug_candidate(const std::string& path, const struct stat* main_st, const std::string& want,
                         ModInfo* mi) {
  int fd = open_regular(path.c_str(), mi);
  if (fd < 0) return -1;
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && !(main_st && st.st_ino == main_st->st_ino && st.st_dev == main_st->st_dev);
  Elf* e = ok ? dw().elf_begin(fd, ELF_C_READ_MMAP, nullptr) : nullptr;
  ok = e && same_build_id(e, want);
  if (e) dw().elf_end(e);
  if (ok) return fd;
  close(fd);
  return -1;
}

// Dwfl_Callbacks.find_debuginfo. Search order for a module's separate debug
// file (debug info inside the binary itself wins over all: libdwfl looks
// there before calling this):
//   1. /usr/lib/debug/.build-id/xx/yyyy.debug, xx/yyyy being the build ID in
//      hex (opened here; dwfl_build_id_find_debuginfo finds a dwz alt file
//      by its ID);
//   2. DIR/LINK, 3. DIR/.debug/LINK, 4. /usr/lib/debug/DIR/LINK, where DIR is
//      the binary's directory and LINK its .gnu_debuglink name; a file found
//      by name is used only if its build ID is the module's.
// Not dwfl_standard_find_debuginfo: when nothing is found locally it asks
// debuginfod, which loads libcurl and, with DEBUGINFOD_URLS set (Debian sets
// it for login shells), downloads while the profiled process is stopping.
int find_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, Dwarf_Addr base,
                   const char* file_name, const char* link, GElf_Word crc, char** debug_name) {
  auto* mi = userdata ? static_cast<ModInfo*>(*userdata) : nullptr;
  if (mi && crc != 0) {
    // Step 1 by hand: dwfl_build_id_find_debuginfo opens the file as the
    // module's debug ELF itself, and libdwfl then reads that one whatever
    // descriptor this returns -- the inflated copy went unread, and libdw
    // inflated libc6-dbg's sections in every image (35-40 ms).
    const std::string p = build_id_debug_path(mi->build_id);
    witness(mi, p);
    int fd = p.empty() ? -1 : open_debug_candidate(p, nullptr, mi->build_id, mi);
    if (fd >= 0) {
      char* real = realpath(p.c_str(), nullptr);  // as libdwfl names it: a dwz link is relative to it
      *debug_name = real ? real : strdup(p.c_str());
      witness(mi, *debug_name);
      return use_inflated(fd, mi);
    }
  }
  // (libdwfl's own step 1 looks at the same path: called for a dwz file,
  // and for a module whose build ID is not known here.)
  const bool looked = mi && crc != 0 && !mi->build_id.empty();
  if (mi && crc == 0 && link && link[0] == '/') witness(mi, link);  // a dwz file, named by its path
  int fd = looked ? -1 : dw().dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, link,
                                                            crc, debug_name);
  if (fd >= 0 && *debug_name) witness(mi, *debug_name);
  // A dwz file libdwfl did not find by its build ID (it looks by path, in
  // the program's root), by the path it is named by, as libdw itself would
  // try next, but from the root the program started with (fsroot.h).
  if (fd < 0 && crc == 0 && link && link[0] == '/') {
    fd = open_debug_candidate(link, nullptr, std::string(), mi);
    if (fd >= 0) *debug_name = strdup(link);
  }
  // crc == 0 is libdwfl asking for a dwz alt file, which has no debuglink
  // (and another build ID than the module's: never inflated under its name).
  if (fd >= 0 && crc != 0) return use_inflated(fd, mi);
  if (fd >= 0 || !link || crc == 0 || !file_name || file_name[0] != '/') return fd;
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr;
  int n = dw().dwfl_module_build_id(mod, &bits, &vaddr);
  if (n <= 0) return -1;  // nothing to tell a stale debug file from the right one
  const std::string want(reinterpret_cast<const char*>(bits), n);
  const std::string dir(file_name, std::strrchr(file_name, '/') - file_name);
  struct stat main_st;
  const bool have_main = fsroot::stat(file_name, &main_st) == 0;
  const std::string candidates[] = {dir + "/" + link, dir + "/.debug/" + link,
                                    "/usr/lib/debug" + dir + "/" + link};
  for (const auto& c : candidates) {
    witness(mi, c);
    fd = open_debug_candidate(c, have_main ? &main_st : nullptr, want, mi);
    if (fd >= 0) {
      *debug_name = strdup(c.c_str());
      return use_inflated(fd, mi);
    }
  }
  return -1;
}

// The default path of libdwfl, spelled out: "" the binary's own directory,
// ".debug" below it, and /usr/lib/debug (whose .build-id/ step 1 searches).
char g_debuginfo_path[] = ":.debug:/usr/lib/debug";
char* g_debuginfo_path_ptr = g_debuginfo_path;

}  // namespace

void fill_callbacks(Dwfl_Callbacks* cb) {
  cb->find_elf = find_elf;
  cb->find_debuginfo = find_debuginfo;
  cb->section_address = dw().dwfl_offline_section_address;
  cb->debuginfo_path = &g_debuginfo_path_ptr;
}

}  // namespace internal
}  // namespace symbolize
