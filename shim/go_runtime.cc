// go_runtime: Go's exit caught, goroutine stacks found; see go_runtime.h.
#include "go_runtime.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "arch.h"
#include "errline.h"
#include "glibc_compat.h"
#include "freeze.h"
#include "go_stacks.h"
#include "go_unwind.h"
#include "lifecycle.h"
#include "signals.h"
#include "sys.h"

// Entered by a jump from runtime.exit's first instruction with the status
// in edi (that instruction, loading it, is kept) and the stack pointer on a
// goroutine's stack, which may have a few hundred bytes left: the first
// thread here moves to a stack of the shim's before any C code runs, and
// passes where it came from (rsi). A
// second thread that exits meanwhile waits (the first one's exit_group ends
// it), at most as long as the stop may take, then exits itself.
extern "C" {
__attribute__((visibility("hidden"))) void profshim_go_exit_stub();
__attribute__((visibility("hidden"), noreturn)) void profshim_go_exit(int status, uintptr_t sp);
__attribute__((visibility("hidden"))) char* profshim_go_exit_top;
__attribute__((visibility("hidden"))) int profshim_go_exit_busy;
__attribute__((visibility("hidden"))) int profshim_go_exit_waits = 1000;
__attribute__((visibility("hidden"))) struct timespec profshim_go_exit_pause = {0, 10000000};
}

#if defined(__x86_64__)
__asm__(R"(
  .text
  .globl profshim_go_exit_stub
  .hidden profshim_go_exit_stub
  .type profshim_go_exit_stub,@function
profshim_go_exit_stub:
  movl $1, %eax
  xchgl %eax, profshim_go_exit_busy(%rip)
  testl %eax, %eax
  jnz 1f
  movq %rsp, %rsi
  movq profshim_go_exit_top(%rip), %rsp
  andq $-16, %rsp
  call profshim_go_exit
  ud2
1:
  movl %edi, %r12d
  movl profshim_go_exit_waits(%rip), %r13d
2:
  leaq profshim_go_exit_pause(%rip), %rdi
  xorl %esi, %esi
  movl $35, %eax
  syscall
  decl %r13d
  jnz 2b
  movl %r12d, %edi
  movl $231, %eax
  syscall
  ud2
  .size profshim_go_exit_stub, .-profshim_go_exit_stub
)");
#endif  // elsewhere (aarch64) Go's exit is not caught: setup() says so

namespace go_runtime {
namespace {

bool g_go;
// The goroutine pointer's place, relative to the thread pointer (%fs:0):
// the same in every thread (static TLS). 0: unknown.
intptr_t g_tls_off;
[[maybe_unused]] alignas(16) char g_exit_stack[128 << 10];
char g_how[96];
uint64_t g_timeout_ms;

// runtime.exit as every Go release since 1.0 assembles it on linux/amd64:
// MOVL code+0(FP), DI; MOVL $231, AX; SYSCALL; RET; then INT3 padding.
const unsigned char kExit[] = {0x8b, 0x7c, 0x24, 0x08, 0xb8, 0xe7, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xc3, 0xcc, 0xcc, 0xcc, 0xcc};
constexpr size_t kKept = 4;  // the status load stays

// Whether an object's notes (its program headers ph, loaded at bias) name
// Go: Go writes its name "Go\0\0", with that size.
bool go_notes(const ElfW(Phdr)* ph, int n, ElfW(Addr) bias) {
  for (int i = 0; i < n; ++i) {
    if (ph[i].p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(bias + ph[i].p_vaddr);
    const char* end = p + ph[i].p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof *nh;
      if ((nh->n_namesz == 3 || nh->n_namesz == 4) && name + 3 <= end && memcmp(name, "Go", 3) == 0) return true;
      p = name + ((nh->n_namesz + 3) & ~3u) + ((nh->n_descsz + 3) & ~3u);
    }
  }
  return false;
}

int has_go_note(struct dl_phdr_info* info, size_t, void* out) {
  if (go_notes(info->dlpi_phdr, info->dlpi_phnum, info->dlpi_addr)) *static_cast<bool*>(out) = true;
  return 1;  // the main executable is the first object listed
}

struct Exe {
  uint64_t bias = 0;
  void* tls = nullptr;  // its TLS block in this thread
  uint64_t text_lo[4] = {}, text_hi[4] = {};
  int ntext = 0;
  uint64_t tls_size = 0;  // its PT_TLS's
  bool in_text(uint64_t a, size_t n) const {
    for (int i = 0; i < ntext; ++i)
      if (a >= text_lo[i] && a + n <= text_hi[i]) return true;
    return false;
  }
};

[[maybe_unused]] int exe_info(struct dl_phdr_info* info, size_t, void* out) {
  auto* e = static_cast<Exe*>(out);
  e->bias = info->dlpi_addr, e->tls = info->dlpi_tls_data;
  for (int i = 0; i < info->dlpi_phnum && e->ntext < 4; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_TLS) e->tls_size = ph.p_memsz;
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    e->text_lo[e->ntext] = info->dlpi_addr + ph.p_vaddr;
    e->text_hi[e->ntext++] = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
  }
  return 1;
}

// name, of at most room bytes of the string table, is exactly lit.
bool named(const char* name, size_t room, const char* lit) {
  size_t n = strlen(lit);
  return room > n && memcmp(name, lit, n + 1) == 0;
}

struct Symbols {
  uint64_t pclntab = 0, pclntab_size = 0;  // .gopclntab, as linked
  bool dwarf = false;                      // .debug_info is there
  uint64_t pcln_sym = 0, epcln_sym = 0;    // runtime.pclntab, runtime.epclntab
  uint64_t relro = 0, relro_size = 0;      // .data.rel.ro: a PIE's pclntab is inside
  uint64_t exit = 0;
  uint64_t tlsg = 0;
  bool tlsg_found = false;
};

// The executable's own symbol table (.symtab: not loaded, read from the file).
[[maybe_unused]] bool read_symbols(Symbols* s) {
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  void* map = fstat(fd, &st) == 0 && st.st_size > 0 ? mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0)
                                                     : MAP_FAILED;
  close(fd);
  if (map == MAP_FAILED) return false;
  const char* base = static_cast<const char*>(map);
  const size_t size = size_t(st.st_size);
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
  bool ok = false;
  if (size >= sizeof *eh && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
      eh->e_shentsize == sizeof(ElfW(Shdr)) && eh->e_shoff + uint64_t(eh->e_shnum) * sizeof(ElfW(Shdr)) <= size) {
    const auto* sh = reinterpret_cast<const ElfW(Shdr)*>(base + eh->e_shoff);
    const ElfW(Shdr)* names = eh->e_shstrndx < eh->e_shnum ? &sh[eh->e_shstrndx] : nullptr;
    for (int i = 0; names && names->sh_offset + names->sh_size <= size && i < eh->e_shnum; ++i) {
      if (sh[i].sh_name >= names->sh_size) continue;
      const char* name = base + names->sh_offset + sh[i].sh_name;
      size_t room = names->sh_size - sh[i].sh_name;
      if (named(name, room, ".debug_info") || named(name, room, ".zdebug_info")) s->dwarf = true;
      if (!(sh[i].sh_flags & SHF_ALLOC)) continue;
      if (named(name, room, ".gopclntab") || named(name, room, ".data.rel.ro.gopclntab"))
        s->pclntab = sh[i].sh_addr, s->pclntab_size = sh[i].sh_size;
      if (named(name, room, ".data.rel.ro")) s->relro = sh[i].sh_addr, s->relro_size = sh[i].sh_size;
    }
    for (int i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
      const ElfW(Shdr)& strs = sh[sh[i].sh_link];
      if (sh[i].sh_offset + sh[i].sh_size > size || strs.sh_offset + strs.sh_size > size) continue;
      const auto* sym = reinterpret_cast<const ElfW(Sym)*>(base + sh[i].sh_offset);
      const char* names = base + strs.sh_offset;
      for (size_t k = 0, n = sh[i].sh_size / sizeof(ElfW(Sym)); k < n; ++k) {
        if (sym[k].st_name >= strs.sh_size) continue;
        const char* name = names + sym[k].st_name;
        size_t room = strs.sh_size - sym[k].st_name;
        // Go 1.17 on: the assembly function is runtime.exit.abi0.
        if ((named(name, room, "runtime.exit.abi0") || (!s->exit && named(name, room, "runtime.exit"))) &&
            ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC) {
          s->exit = sym[k].st_value;
        } else if (named(name, room, "runtime.tlsg") && ELF64_ST_TYPE(sym[k].st_info) == STT_TLS) {
          s->tlsg = sym[k].st_value, s->tlsg_found = true;
        } else if (named(name, room, "runtime.pclntab")) {
          s->pcln_sym = sym[k].st_value;
        } else if (named(name, room, "runtime.epclntab")) {
          s->epcln_sym = sym[k].st_value;
        }
      }
      ok = true;
    }
  }
  munmap(map, size);
  return ok;
}

// Through /proc/self/mem, which writes a private copy of the page without
// changing its protection (nor splitting the mapping a program may read in
// /proc/self/maps); mprotect where the kernel refuses that.
[[maybe_unused]] bool write_text(uint64_t addr, const unsigned char* bytes, size_t n) {
  int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t w = pwrite(fd, bytes, n, off_t(addr));
    close(fd);
    if (w == ssize_t(n)) return true;
  }
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  void* lo = reinterpret_cast<void*>(addr & ~(page - 1));
  size_t len = size_t(((addr + n + page - 1) & ~(page - 1)) - (addr & ~(page - 1)));
  if (mprotect(lo, len, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return false;
  memcpy(reinterpret_cast<void*>(addr), bytes, n);
  mprotect(lo, len, PROT_READ | PROT_EXEC);
  return true;
}

}  // namespace

bool detect() {
  bool go = false;
  dl_iterate_phdr(has_go_note, &go);
  return go;
}

bool is_go() { return g_go; }

bool in_go_object(const void* pc) {
  // _dl_find_object takes no lock (dl_iterate_phdr takes the loader's, and
  // before glibc 2.35 is all there is: glibc_compat.h).
  // Its object's ELF header and program headers open its first mapping, as
  // every linker lays one out, Go's too: read within that first page; a
  // note only where a loaded segment covers it (between segments, the
  // loader leaves holes that fault).
  glibc_compat::FoundObject fo;
  if (glibc_compat::dl_find_object(const_cast<void*>(pc), &fo) != 0 || !fo.link_map) return false;
  const uintptr_t lo = uintptr_t(fo.map_start), hi = uintptr_t(fo.map_end);
  constexpr uintptr_t kPage = 4096;
  const auto* eh = static_cast<const ElfW(Ehdr)*>(fo.map_start);
  if (hi - lo < kPage || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phentsize != sizeof(ElfW(Phdr)) ||
      eh->e_phoff + uintptr_t(eh->e_phnum) * sizeof(ElfW(Phdr)) > kPage)
    return false;
  const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(lo + eh->e_phoff);
  const int n = eh->e_phnum;
  for (int i = 0; i < n; ++i) {
    if (ph[i].p_type != PT_NOTE) continue;
    bool loaded = false;
    for (int j = 0; j < n && !loaded; ++j)
      loaded = ph[j].p_type == PT_LOAD && ph[i].p_vaddr >= ph[j].p_vaddr &&
               ph[i].p_vaddr + ph[i].p_memsz <= ph[j].p_vaddr + ph[j].p_filesz;
    if (!loaded) return false;
  }
  return go_notes(ph, n, fo.link_map->l_addr);
}

bool setup(uint64_t stop_timeout_ms, const char** why) {
  g_go = true;
#if !defined(__x86_64__)
  // The rewrite, the stub and the goroutine walk (go_stacks' offsets read
  // from amd64 code) are x86-64's: a Go program elsewhere is profiled as C,
  // its Go frames as far as the unwinder reaches (docs/DESIGN.md, "arm64").
  (void)stop_timeout_ms;
  return *why = "Go programs are supported on x86-64 only", false;
#else
  Symbols s;
  const bool symtab = read_symbols(&s);
  Exe exe;
  dl_iterate_phdr(exe_info, &exe);
  // The goroutine's place: the executable's TLS block in this thread, at
  // runtime.tlsg's offset in it; in a stripped binary whose TLS is Go's
  // one word alone, that word.
  if (!s.tlsg_found && exe.tls_size == 8) s.tlsg = 0, s.tlsg_found = true;
  if (s.tlsg_found && exe.tls) g_tls_off = intptr_t(uintptr_t(exe.tls) + s.tlsg - arch::thread_pointer());
  // Go's tables survive stripping (its runtime needs them). Go's own
  // linker puts them in a section of their own, except in a PIE, where they
  // lie inside .data.rel.ro: found by their symbols, or else by their
  // header's magic number there.
  if (!s.pclntab && s.pcln_sym && s.epcln_sym > s.pcln_sym)
    s.pclntab = s.pcln_sym, s.pclntab_size = s.epcln_sym - s.pcln_sym;
  if (s.pclntab) {
    go_unwind::load(reinterpret_cast<const void*>(s.pclntab + exe.bias), s.pclntab_size, !s.dwarf);
  } else if (s.relro) {
    const auto* lo = reinterpret_cast<const unsigned char*>(s.relro + exe.bias);
    for (uint64_t off = 0; off + 64 <= s.relro_size; off += 8) {
      uint32_t magic;
      memcpy(&magic, lo + off, 4);
      if ((magic == 0xfffffff1 || magic == 0xfffffff0 || magic == 0xfffffffa) &&
          go_unwind::load(lo + off, s.relro_size - off, !s.dwarf))
        break;
    }
  }
  if (g_tls_off) go_stacks::learn();
  // runtime.exit: from the symbol table, or else from Go's own (stripped).
  uint64_t exit = s.exit ? s.exit + exe.bias : go_unwind::find_function("runtime.exit");
  if (!exit || !exe.in_text(exit, sizeof kExit))
    return *why = symtab ? "no runtime.exit in its tables" : "no symbol table, and no runtime.exit in Go's", false;
  if (memcmp(reinterpret_cast<const void*>(exit), kExit, sizeof kExit) != 0)
    return *why = "runtime.exit is not the code this shim knows", false;
  profshim_go_exit_top = g_exit_stack + sizeof g_exit_stack;
  // Waits of 10 ms: as long as the stop may take, and 10 s more.
  profshim_go_exit_waits = int(stop_timeout_ms / 10 + 1000);
  g_timeout_ms = stop_timeout_ms;
  // movabs $stub, %rax; jmp *%rax
  unsigned char jump[12] = {0x48, 0xb8};
  uint64_t target = reinterpret_cast<uint64_t>(&profshim_go_exit_stub);
  memcpy(jump + 2, &target, 8);
  jump[10] = 0xff, jump[11] = 0xe0;
  if (!write_text(exit + kKept, jump, sizeof jump)) return *why = "its code could not be written", false;
  return true;
#endif
}

uintptr_t current_g() {
  // A thread that never ran Go code holds 0 there; any other, the goroutine
  // it runs (or its scheduler's).
  return g_tls_off ? *reinterpret_cast<const uintptr_t*>(arch::thread_pointer() + g_tls_off) : 0;
}

bool goroutine_stack(uintptr_t sp, uintptr_t* lo, uintptr_t* hi) {
  // The goroutine's first words are its stack's bounds.
  const uintptr_t* g = reinterpret_cast<const uintptr_t*>(current_g());
  if (!g) return false;
  uintptr_t l = g[0], h = g[1];
  if (sp < l || sp >= h) return false;
  *lo = l, *hi = h;
  return true;
}

}  // namespace go_runtime

extern "C" void profshim_go_exit(int status, uintptr_t sp) {
  // The stop's record of how the program ended.
  static const char kHow[] = "Go's exit (status ";
  char* p = go_runtime::g_how;
  memcpy(p, kHow, sizeof kHow - 1);
  p += sizeof kHow - 1;
  if (status < 0) *p++ = '-';
  p = sys::put_uint(p, status < 0 ? 0u - unsigned(status) : unsigned(status));  // INT_MIN too
  *p++ = ')', *p = 0;
  // Go ends the process from its signal handler too (SIGQUIT, a fault in
  // C code, glibc's abort): the code it interrupted may hold malloc's lock,
  // which a stop (its thread, its symbols) would wait on for ever.
  stack_t alt;
  if (signals::raw_sigaltstack(nullptr, &alt) == 0 && alt.ss_size && sp >= uintptr_t(alt.ss_sp) &&
      sp < uintptr_t(alt.ss_sp) + alt.ss_size) {
    // No allocation here (the lock it would take may be held): a static line.
    static char text[256];
    static const char kHead[] = "no profile: ";
    static const char kTail[] = " came from inside a signal handler, over code that may hold the locks a stop needs";
    size_t n = strlen(go_runtime::g_how);
    memcpy(text, kHead, sizeof kHead - 1);
    memcpy(text + sizeof kHead - 1, go_runtime::g_how, n);
    memcpy(text + sizeof kHead - 1 + n, kTail, sizeof kTail);
    if (lifecycle::active()) errline::line(text);
  } else {
    // exit_group would end every thread at once: none runs on during the
    // stop. (A stop already under way, a fatal signal's, is waited for as
    // any thread would, parked when asked.)
    if (lifecycle::active()) freeze::exempt(true);
    if (lifecycle::active())
      freeze::others_before(sys::now_ns(CLOCK_MONOTONIC) + go_runtime::g_timeout_ms * 1000000ull);
    lifecycle::stop(go_runtime::g_how);
  }
  sys::exit_group(status);
  __builtin_unreachable();
}
