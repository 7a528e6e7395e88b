// symbolize_image: what a loaded ELF image says about itself (its build ID,
// its soname and the libraries it needs), read from this process's memory
// rather than from its file: what is mapped is what ran, even when the file
// on disk has been replaced or deleted since.
#include <elf.h>
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "symbolize_internal.h"

namespace symbolize {
namespace internal {

namespace {

std::string build_id_in_notes(const char* p, uint64_t size, uint64_t align) {
  auto padded = [align](uint64_t n) { return (n + align - 1) & ~(align - 1); };
  while (size >= sizeof(Elf64_Nhdr)) {
    Elf64_Nhdr nh;
    std::memcpy(&nh, p, sizeof nh);
    const uint64_t name_len = padded(nh.n_namesz), desc_len = padded(nh.n_descsz);
    if (name_len + desc_len > size - sizeof nh) break;
    const char* name = p + sizeof nh;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0)
      return std::string(name + name_len, nh.n_descsz);
    p += sizeof nh + name_len + desc_len;
    size -= sizeof nh + name_len + desc_len;
  }
  return "";
}

}  // namespace

// Copies [addr, addr + n) of this process's memory into buf. Through
// process_vm_readv, which fails with EFAULT rather than faulting when another
// thread has unmapped the range since the maps text was read (a dlclose
// racing the stop); a plain copy only where the kernel refuses the call.
bool read_memory(const std::vector<procmaps::Line>& lines, uint64_t addr, void* buf, size_t n) {
  if (!procmaps::readable(lines, addr, n)) return false;
  struct iovec local = {buf, n}, remote = {reinterpret_cast<void*>(addr), n};
  ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (r == static_cast<ssize_t>(n)) return true;
  if (r < 0 && (errno == ENOSYS || errno == EPERM)) {
    std::memcpy(buf, reinterpret_cast<const void*>(addr), n);
    return true;
  }
  return false;
}

namespace {

// The program headers of the image whose file offset 0 is mapped at head,
// and its load bias (run-time address minus the file's vaddr).
bool program_headers(const std::vector<procmaps::Line>& lines, const procmaps::Line& head,
                     std::vector<Elf64_Phdr>* ph, uint64_t* bias) {
  if (!head.readable() || head.offset != 0 || head.end - head.start < sizeof(Elf64_Ehdr)) return false;
  // The header and, nearly always, the program headers in one read: a
  // server's forty libraries are read at each of its children's stops.
  char first[1024];
  const size_t got = std::min<uint64_t>(sizeof first, head.end - head.start);
  if (!read_memory(lines, head.start, first, got)) return false;
  Elf64_Ehdr eh;
  std::memcpy(&eh, first, sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phoff + uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr) > head.end - head.start)
    return false;
  ph->resize(eh.e_phnum);
  const size_t bytes = ph->size() * sizeof(Elf64_Phdr);
  if (ph->empty()) return false;
  if (eh.e_phoff + bytes <= got)
    std::memcpy(ph->data(), first + eh.e_phoff, bytes);
  else if (!read_memory(lines, head.start + eh.e_phoff, ph->data(), bytes))
    return false;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  for (const auto& p : *ph)
    if (p.p_type == PT_LOAD) {  // the loader maps it at the page holding p_vaddr
      *bias = head.start - (p.p_vaddr & ~(page - 1));
      return true;
    }
  return false;
}

}  // namespace

std::string build_id_from_memory(const std::vector<procmaps::Line>& lines,
                                 const procmaps::Line& head) {
  std::vector<Elf64_Phdr> ph;
  uint64_t bias = 0;
  if (!program_headers(lines, head, &ph, &bias)) return "";
  for (const auto& p : ph) {
    if (p.p_type != PT_NOTE || p.p_filesz > (1u << 16)) continue;
    std::vector<char> notes(p.p_filesz);
    if (notes.empty() || !read_memory(lines, bias + p.p_vaddr, notes.data(), notes.size())) continue;
    std::string id = build_id_in_notes(notes.data(), notes.size(), p.p_align == 8 ? 8 : 4);
    if (!id.empty()) return id;
  }
  return "";
}

bool dynamic_from_memory(const std::vector<procmaps::Line>& lines, const procmaps::Line& head,
                         Dynamic* out) {
  std::vector<Elf64_Phdr> ph;
  uint64_t bias = 0;
  if (!program_headers(lines, head, &ph, &bias)) return false;
  std::vector<Elf64_Dyn> dyn;
  for (const auto& p : ph)
    if (p.p_type == PT_DYNAMIC && p.p_memsz >= sizeof(Elf64_Dyn) && p.p_memsz <= (1u << 16)) {
      dyn.resize(p.p_memsz / sizeof(Elf64_Dyn));
      if (!read_memory(lines, bias + p.p_vaddr, dyn.data(), dyn.size() * sizeof(Elf64_Dyn))) return false;
    }
  uint64_t strtab = 0, strsz = 0;
  std::vector<uint64_t> needed;
  int64_t soname = -1;
  for (const auto& d : dyn) {
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
    if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val;
    if (d.d_tag == DT_NEEDED) needed.push_back(d.d_un.d_val);
    if (d.d_tag == DT_SONAME) soname = static_cast<int64_t>(d.d_un.d_val);
  }
  if (!strtab || !strsz) return false;
  // The loader relocates the dynamic section in place where it can write it;
  // a read-only one (the [vdso]'s) still holds the file's vaddr.
  if (strtab < bias) strtab += bias;
  // The names wanted, in one read of the part of the string table that
  // holds them where that is at most 16 KiB, else one read each.
  uint64_t lo = soname >= 0 ? uint64_t(soname) : UINT64_MAX, hi = soname >= 0 ? uint64_t(soname) : 0;
  for (uint64_t off : needed) lo = std::min(lo, off), hi = std::max(hi, off);
  std::string span;
  if (lo < strsz && hi >= lo) {
    const uint64_t end = std::min<uint64_t>(strsz, hi + 256);
    if (end - lo <= (16u << 10)) {
      span.resize(end - lo);
      if (!read_memory(lines, strtab + lo, &span[0], span.size())) span.clear();
    }
  }
  auto string_at = [&](uint64_t off) {
    if (!span.empty() && off >= lo && off < lo + span.size()) {
      const char* p = span.data() + (off - lo);
      return std::string(p, strnlen(p, span.size() - (off - lo)));
    }
    char buf[256];
    const size_t n = off < strsz ? std::min<uint64_t>(sizeof buf, strsz - off) : 0;
    if (!n || !read_memory(lines, strtab + off, buf, n)) return std::string();
    return std::string(buf, strnlen(buf, n));
  };
  if (soname >= 0) out->soname = string_at(soname);
  for (uint64_t off : needed) {
    std::string n = string_at(off);
    if (!n.empty()) out->needed.push_back(n);
  }
  return true;
}

std::string hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

}  // namespace internal

}  // namespace symbolize
