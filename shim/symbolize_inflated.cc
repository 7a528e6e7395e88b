// symbolize_inflated: a compressed debug file paid for once per session.
// Debian compresses the DWARF of its -dbg packages (libc6-dbg: 4 MiB on
// disk, 10 MiB inflated), and libdw inflates every debug section of a file
// when it opens it: 35-40 ms of zlib here for libc alone, in every image
// that has one libc address the symbol cache does not (a compiler's new
// samples, a backend's). So the first image to open such a file writes an
// inflated copy beside the symbol cache's entries, PROFILE_DIR/
// .profshim-symbols/BUILDID.debug, and the images after it open that (an
// mmap, ~1 ms). The copy is the file with its sections inflated, written a
// section at a time (never the whole inflated DWARF in memory: that was the
// stop's peak RSS) to a temporary and renamed into place;
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
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "fsroot.h"
#include "gzip.h"
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

bool pread_all(int fd, void* buf, size_t n, uint64_t off) {
  for (size_t done = 0; done < n;) {
    ssize_t r = pread(fd, static_cast<char*>(buf) + done, n - done, off_t(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += size_t(r);
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t n) {
  for (size_t done = 0; done < n;) {
    ssize_t w = write(fd, static_cast<const char*>(buf) + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += size_t(w);
  }
  return true;
}

// Bytes [off, off + n) of from appended to to, 64 KiB at a time.
bool copy_range(int from, uint64_t off, uint64_t n, int to) {
  char buf[1 << 16];
  while (n) {
    const size_t step = size_t(std::min<uint64_t>(n, sizeof buf));
    if (!pread_all(from, buf, step, off) || !write_all(to, buf, step)) return false;
    off += step, n -= step;
  }
  return true;
}

bool pad_to(int fd, uint64_t* pos, uint64_t align) {
  static const char zeros[64] = {};
  if (align > 64 || align == 0) align = align ? 64 : 1;  // (a debug section asks 1 to 16)
  while (*pos % align) {
    const size_t n = size_t(std::min<uint64_t>(align - *pos % align, sizeof zeros));
    if (!write_all(fd, zeros, n)) return false;
    *pos += n;
  }
  return true;
}

// A copy is as large as the file with its sections inflated (a Go
// service's binary: hundreds of MB). It is made only under a cap, and only
// where the file system keeps twice that free besides a margin, so the copy
// never takes the space the program's own writes need (a snapshot's copy is
// made while it runs); refused, libdw reads the compressed sections itself.
constexpr uint64_t kMaxCopy = uint64_t(256) << 20;
constexpr uint64_t kFreeMargin = uint64_t(64) << 20;

bool room_for(int in, const std::string& dir, const std::vector<Elf64_Shdr>& sh) {
  uint64_t total = 0;
  for (const Elf64_Shdr& s : sh) {
    uint64_t n = s.sh_type == SHT_NOBITS ? 0 : s.sh_size;
    Elf64_Chdr ch{};
    if ((s.sh_flags & SHF_COMPRESSED) && n >= sizeof ch && pread_all(in, &ch, sizeof ch, s.sh_offset)) n = ch.ch_size;
    total += n;
    if (total > kMaxCopy) return false;
  }
  struct stat st;
  if (fstat(in, &st) == 0 && uint64_t(st.st_size) > total) total = uint64_t(st.st_size);
  struct statfs fs;  // (a call the seccomp probe already holds the stop to)
  if (statfs(dir.c_str(), &fs) != 0) return false;
  return total <= kMaxCopy && uint64_t(fs.f_bavail) * uint64_t(fs.f_bsize) >= 2 * total + kFreeMargin;
}

// Writes the copy of the ELF64 file `in` to `out` one section at a time,
// each compressed one inflated as it is written (gzip::inflate_file): the
// stop's memory is a few buffers, not the file inflated whole (libelf's
// elf_compress + elf_update held every inflated section at once: 10 MiB of
// libc6-dbg's, 30 MiB of python3.11-dbg's, all of it in the peak RSS of the
// program stopping). Sections go in their file order, each at its
// alignment and never before its place in the original; the section
// headers last. A program header keeps its place relative to the section
// it lies in. 1 when written, 0 when the
// file is not one this knows (then libelf makes the copy), -1 on failure.
int stream_copy(int in, int out, const std::string& dir) {
  Elf64_Ehdr eh;
  if (!pread_all(in, &eh, sizeof eh, 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum >= SHN_LORESERVE ||
      eh.e_shstrndx >= SHN_LORESERVE || (eh.e_phnum && eh.e_phentsize != sizeof(Elf64_Phdr)) ||
      eh.e_phnum >= 0xffff)
    return 0;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!pread_all(in, sh.data(), sh.size() * sizeof sh[0], eh.e_shoff) ||
      (eh.e_phnum && !pread_all(in, ph.data(), ph.size() * sizeof ph[0], eh.e_phoff)))
    return -1;
  if (!room_for(in, dir, sh)) return -1;
  std::vector<Elf64_Shdr> nsh = sh;
  std::vector<size_t> order;
  for (size_t i = 1; i < sh.size(); ++i)
    if (sh[i].sh_type != SHT_NULL) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sh[a].sh_offset < sh[b].sh_offset; });
  uint64_t pos = sizeof eh + ph.size() * sizeof(Elf64_Phdr);
  if (!write_all(out, &eh, sizeof eh) || (eh.e_phnum && !write_all(out, ph.data(), ph.size() * sizeof ph[0])))
    return -1;
  for (size_t i : order) {
    const Elf64_Shdr& s = sh[i];
    Elf64_Shdr& n = nsh[i];
    Elf64_Chdr ch{};
    const bool z = (s.sh_flags & SHF_COMPRESSED) && s.sh_type != SHT_NOBITS;
    if (z && (s.sh_size < sizeof ch || !pread_all(in, &ch, sizeof ch, s.sh_offset))) return -1;
    if (z && ch.ch_type != ELFCOMPRESS_ZLIB) return 0;
    if (!pad_to(out, &pos, z ? ch.ch_addralign : s.sh_addralign)) return -1;
    // Never before its place in the file: what precedes the first inflated
    // section (a binary's loaded code and data) stays where its program
    // headers say.
    while (pos < s.sh_offset) {
      static const char zeros[4096] = {};
      const size_t k = size_t(std::min<uint64_t>(s.sh_offset - pos, sizeof zeros));
      if (!write_all(out, zeros, k)) return -1;
      pos += k;
    }
    n.sh_offset = pos;
    if (s.sh_type == SHT_NOBITS) continue;
    if (z) {
      if (!gzip::inflate_file(in, s.sh_offset + sizeof ch, s.sh_size - sizeof ch, out, ch.ch_size)) return -1;
      n.sh_flags &= ~uint64_t(SHF_COMPRESSED);
      n.sh_size = ch.ch_size;
      n.sh_addralign = ch.ch_addralign;
    } else if (!copy_range(in, s.sh_offset, s.sh_size, out)) {
      return -1;
    }
    pos += n.sh_size;
  }
  for (Elf64_Phdr& p : ph)
    for (size_t i : order)
      if (!(sh[i].sh_flags & SHF_COMPRESSED) && sh[i].sh_type != SHT_NOBITS && p.p_offset >= sh[i].sh_offset &&
          p.p_offset < sh[i].sh_offset + sh[i].sh_size) {
        p.p_offset = p.p_offset - sh[i].sh_offset + nsh[i].sh_offset;
        break;
      }
  if (!pad_to(out, &pos, 8)) return -1;
  Elf64_Ehdr neh = eh;
  neh.e_phoff = eh.e_phnum ? sizeof eh : 0;
  neh.e_shoff = pos;
  return write_all(out, nsh.data(), nsh.size() * sizeof nsh[0]) &&
                 pwrite(out, &neh, sizeof neh, 0) == ssize_t(sizeof neh) &&
                 (!eh.e_phnum || pwrite(out, ph.data(), ph.size() * sizeof ph[0], sizeof eh) ==
                                     ssize_t(ph.size() * sizeof ph[0]))
             ? 1
             : -1;
}

// The copy made by libelf, for a file stream_copy does not know (not ELF64
// little-endian, or another compression than zlib): every inflated section
// in memory at once.
bool libelf_copy(int fd, int out) {
  bool ok = copy_bytes(fd, out);
  Elf* e = ok ? dw().elf_begin(out, ELF_C_RDWR, nullptr) : nullptr;
  ok = e != nullptr;
  for (Elf_Scn* scn = ok ? dw().elf_nextscn(e, nullptr) : nullptr; ok && scn; scn = dw().elf_nextscn(e, scn)) {
    GElf_Shdr sh;
    if (dw().gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED)) ok = dw().elf_compress(scn, 0, 0) == 1;
  }
  ok = ok && dw().elf_update(e, ELF_C_WRITE) >= 0;
  if (e) dw().elf_end(e);
  return ok;
}

// Writes path as fd's file with every compressed section inflated.
bool make_copy(int fd, const std::string& dir, const std::string& path) {
  // A copy that does not fit is no copy: under RLIMIT_FSIZE libdw reads the
  // compressed sections itself (libelf's writes, the fallback's, cannot be
  // bounded).
  if (sys::fsize_limited()) return false;
  sweep_dead_temporaries(dir);
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r) r = uint64_t(getpid()) * 0x9e3779b97f4a7c15ull;
  char suffix[64];
  snprintf(suffix, sizeof suffix, ".tmp.%d.%016llx", int(getpid()), static_cast<unsigned long long>(r));
  const std::string tmp = dir + "/." + path.substr(dir.size() + 1) + suffix;
  int out = fsroot::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (out < 0) return false;
  int streamed = stream_copy(fd, out, dir);
  bool ok = streamed == 1;
  if (streamed == 0) ok = ftruncate(out, 0) == 0 && lseek(out, 0, SEEK_SET) == 0 && libelf_copy(fd, out);
  if (close(out) != 0) ok = false;
  if (ok && fsroot::rename(tmp.c_str(), path.c_str()) == 0) return true;
  fsroot::unlink(tmp.c_str());
  return false;
}

}  // namespace

int use_inflated(int fd, ModInfo* mi, const char* ext) {
  if (fd < 0 || !mi || mi->profile_dir.empty() || mi->build_id.empty()) return fd;
  gzip::load(nullptr);  // (done at setup already; a unit test's first call)
  Elf* e = dw().elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  bool compressed = e && has_compressed_sections(e);
  if (e) dw().elf_end(e);
  if (!compressed) return fd;
  std::string dir;
  struct stat st;
  const bool existed = fsroot::lstat(cache::dir_of(mi->profile_dir).c_str(), &st) == 0;
  if (!cache::prepare_dir(mi->profile_dir, true, &dir).empty() || dir.empty()) return fd;
  const std::string path = dir + "/" + hex(mi->build_id) + ext;
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
