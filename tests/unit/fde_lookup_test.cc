// fde_lookup: the shim's lock-free lookup of a pc's unwind information
// gives what libgcc's own _Unwind_Find_FDE gives (libgcc_s's, the truth:
// through _dl_find_object from GCC 12, through dl_iterate_phdr before),
// the same FDE and the same function start, at addresses throughout the
// code of every object loaded here: inside functions, at their first and
// last bytes, in the padding between them, before the first and after the
// last.
#include "fde_lookup.h"
#include "glibc_compat.h"
#include "check.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include <vector>

namespace {

using FindFde = const void* (*)(void*, fde_lookup::Bases*);

struct Range {
  uintptr_t lo, hi;
};

int code_ranges(struct dl_phdr_info* info, size_t, void* p) {
  auto* out = static_cast<std::vector<Range>*>(p);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
      out->push_back({info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz});
  }
  return 0;
}

FindFde libgcc_find() {
  void* h = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libgcc_s.so.1", RTLD_NOW);
  return h ? reinterpret_cast<FindFde>(dlsym(h, "_Unwind_Find_FDE")) : nullptr;
}

// Both lookups at pc: 1 if both found the same FDE, 0 if neither found one,
// -1 (with a line) if they differ.
int compare_at(FindFde theirs, uintptr_t pc) {
  fde_lookup::Bases a{}, b{};
  const void* ours = fde_lookup::find(reinterpret_cast<void*>(pc), &a);
  const void* want = theirs(reinterpret_cast<void*>(pc), &b);
  if (ours != want || (want && (a.func != b.func || a.tbase != b.tbase || a.dbase != b.dbase))) {
    std::fprintf(stderr, "  at %#lx: ours %p func %p, libgcc's %p func %p\n", (unsigned long)pc, ours, a.func,
                 want, b.func);
    return -1;
  }
  return want ? 1 : 0;
}

}  // namespace

TEST(agrees_with_libgcc_throughout_every_loaded_objects_code) {
  FindFde theirs = libgcc_find();
  CHECK(theirs != nullptr);
  if (!theirs) return;
  glibc_compat::init();
  std::vector<Range> ranges;
  dl_iterate_phdr(code_ranges, &ranges);
  CHECK(ranges.size() >= 3);  // this program, libc, libgcc_s at least
  long found = 0, none = 0, differ = 0;
  for (const Range& r : ranges) {
    // Every 7th byte of up to 256 KiB from each end, then a spread across
    // the rest: function ends and padding fall among them.
    const uintptr_t span = r.hi - r.lo, near = span < (512u << 10) ? span : (256u << 10);
    auto at = [&](uintptr_t pc) {
      const int c = compare_at(theirs, pc);
      (c > 0 ? found : c == 0 ? none : differ) += 1;
    };
    for (uintptr_t pc = r.lo; pc < r.lo + near; pc += 7) at(pc);
    for (uintptr_t pc = r.hi - near; pc < r.hi; pc += 7) at(pc);
    for (uintptr_t pc = r.lo + near; pc + near < r.hi; pc += 997) at(pc);
  }
  std::fprintf(stderr, "  %zu code ranges: %ld found, %ld without unwind information, %ld differ\n",
               ranges.size(), found, none, differ);
  CHECK_EQ(differ, 0L);
  CHECK(found > 10000);
  CHECK(none > 0);  // padding, PLT stubs, or code before the first FDE
}

TEST(an_address_in_no_object_has_none) {
  glibc_compat::init();
  static char data[64];
  fde_lookup::Bases b{};
  CHECK(fde_lookup::find(data, &b) == nullptr);
  CHECK(fde_lookup::find(reinterpret_cast<void*>(uintptr_t(16)), &b) == nullptr);
}
