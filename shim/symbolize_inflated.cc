// symbolize_inflated: a compressed debug file paid for once per session.
// Debian compresses the DWARF of its -dbg packages (libc6-dbg: 4 MiB on
// disk, 10 MiB inflated), and libdw inflates every debug section of a file
// when it opens it: 35-40 ms of zlib here for libc alone, in every image
// that has one libc address the symbol cache does not (a compiler's new
// samples, a backend's). So the first image to open such a file writes an
// inflated copy beside the symbol cache's entries, PROFILE_DIR/
// .profshim-symbols/BUILDID.debug, and the images after it open that (an
// mmap, ~1 ms). The copy is what libelf makes of the file with its sections
// inflated (elf_compress), written to a temporary and renamed into place;
// it is used only if it is a regular file whose build ID is the module's
// (the same check a debug file found by name gets), in a directory the
// symbol cache accepted (this user's, no one else's to write).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <gelf.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "fsroot.h"
#include "symbolize_cache.h"
#include "symbolize_internal.h"
#include "sys.h"

namespace symbolize {
namespace internal {
namespace {

bool same_id(Elf* elf, const std::string& want) {
  const void* p = nullptr;
  ssize_t n = dw().dwelf_elf_gnu_build_id(elf, &p);
  return n == static_cast<ssize_t>(want.size()) && std::memcmp(p, want.data(), n) == 0;
}

// Every section's bytes inside the file: a copy cut short (by something
// else than this code, which renames only whole copies) is not read.
// (A copy whose section headers are past its end shows none: not one.)
bool within(Elf* elf, uint64_t size) {
  size_t n = 0;
  for (Elf_Scn* scn = dw().elf_nextscn(elf, nullptr); scn; scn = dw().elf_nextscn(elf, scn), ++n) {
    GElf_Shdr sh;
    if (!dw().gelf_getshdr(scn, &sh)) return false;
    if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset)) return false;
  }
  return n > 0;
}

bool has_compressed_sections(Elf* elf) {
  for (Elf_Scn* scn = dw().elf_nextscn(elf, nullptr); scn; scn = dw().elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (dw().gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED)) return true;
  }
  return false;
}

// The copy at path, if it is one of this module's debug file: its fd, else -1.
int open_copy(const std::string& path, const std::string& build_id) {
  int fd = fsroot::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return -1;
  struct stat st;
  Elf* e = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? dw().elf_begin(fd, ELF_C_READ_MMAP, nullptr) : nullptr;
  bool ok = e && same_id(e, build_id) && !has_compressed_sections(e) && within(e, uint64_t(st.st_size));
  if (e) dw().elf_end(e);
  if (ok) return fd;
  close(fd);
  return -1;
}

bool copy_bytes(int from, int to) {
  char buf[1 << 16];
  off_t off = 0;
  for (;;) {
    ssize_t n = pread(from, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = write(to, buf + done, size_t(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      done += w;
    }
    off += n;
  }
}

// Temporaries of processes that are gone: a stop that gave up, or was
// killed, in the middle of a copy (10 MiB each for libc6-dbg's file) would
// otherwise stay in a shared PROFILE_DIR for good. A few seconds' margin,
// and a process that is there (or another user's: EPERM) keeps its own.
void sweep_dead_temporaries(const std::string& dir) {
  DIR* d = fsroot::opendir(dir.c_str());
  if (!d) return;
  const time_t now = time(nullptr);
  while (struct dirent* e = readdir(d)) {
    const char* t = strstr(e->d_name, ".tmp.");
    if (e->d_name[0] != '.' || !t) continue;
    const int pid = atoi(t + 5);
    struct stat st;
    const std::string p = dir + "/" + e->d_name;
    if (pid <= 0 || pid == getpid() || fsroot::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || now - st.st_mtime < 5)
      continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) fsroot::unlink(p.c_str());
  }
  closedir(d);
}

// Writes path as fd's file with every compressed section inflated.
bool make_copy(int fd, const std::string& dir, const std::string& path) {
  // libelf's writes cannot be bounded, and a copy that does not fit is no
  // copy: under RLIMIT_FSIZE libdw reads the compressed sections itself.
  if (sys::fsize_limited()) return false;
  sweep_dead_temporaries(dir);
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r) r = uint64_t(getpid()) * 0x9e3779b97f4a7c15ull;
  char suffix[64];
  snprintf(suffix, sizeof suffix, ".tmp.%d.%016llx", int(getpid()), static_cast<unsigned long long>(r));
  const std::string tmp = dir + "/." + path.substr(dir.size() + 1) + suffix;
  int out = fsroot::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (out < 0) return false;
  bool ok = copy_bytes(fd, out);
  Elf* e = ok ? dw().elf_begin(out, ELF_C_RDWR, nullptr) : nullptr;
  ok = e != nullptr;
  for (Elf_Scn* scn = ok ? dw().elf_nextscn(e, nullptr) : nullptr; ok && scn; scn = dw().elf_nextscn(e, scn)) {
    GElf_Shdr sh;
    if (dw().gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED)) ok = dw().elf_compress(scn, 0, 0) == 1;
  }
  ok = ok && dw().elf_update(e, ELF_C_WRITE) >= 0;
  if (e) dw().elf_end(e);
  if (close(out) != 0) ok = false;
  if (ok && fsroot::rename(tmp.c_str(), path.c_str()) == 0) return true;
  fsroot::unlink(tmp.c_str());
  return false;
}

}  // namespace

int use_inflated(int fd, ModInfo* mi) {
  if (fd < 0 || !mi || mi->profile_dir.empty() || mi->build_id.empty()) return fd;
  Elf* e = dw().elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  bool compressed = e && has_compressed_sections(e);
  if (e) dw().elf_end(e);
  if (!compressed) return fd;
  std::string dir;
  struct stat st;
  const bool existed = fsroot::lstat(cache::dir_of(mi->profile_dir).c_str(), &st) == 0;
  if (!cache::prepare_dir(mi->profile_dir, true, &dir).empty() || dir.empty()) return fd;
  const std::string path = dir + "/" + hex(mi->build_id) + ".debug";
  int copy = open_copy(path, mi->build_id);
  if (copy < 0 && make_copy(fd, dir, path)) copy = open_copy(path, mi->build_id);
  if (copy < 0) {
    // A full disk: no empty directory left behind by this attempt.
    if (!existed) fsroot::rmdir(dir.c_str());
    return fd;
  }
  close(fd);
  return copy;
}

}  // namespace internal
}  // namespace symbolize
