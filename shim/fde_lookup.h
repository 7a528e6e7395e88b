// fde_lookup: finds the unwind information (the FDE in .eh_frame) that covers
// a code address, for the unwinder linked into the shim, without the
// loader's lock.
//
// libgcc's own lookup, before GCC 12, walks the loaded objects with
// dl_iterate_phdr, which takes the loader's lock. The shim's walks run in
// signal handlers; a sample that lands while the thread holds that lock
// (inside its own C++ throw, a dlopen, jemalloc's backtrace) would wait on
// itself for ever. GCC 12's libgcc uses _dl_find_object instead, which
// glibc has only from 2.35. This lookup does what GCC 12's does on every
// build: the object from glibc_compat::dl_find_object (libc's, or the
// shim's table before 2.35), then a binary search of its .eh_frame_hdr
// table. Async-signal-safe: reads only loaded, mapped unwind tables.
#pragma once
#include <stdint.h>

namespace fde_lookup {

// libgcc's struct dwarf_eh_bases, which _Unwind_Find_FDE fills in.
struct Bases {
  void* tbase;
  void* dbase;
  void* func;
};

// The FDE whose range holds pc, with bases filled in, or null: no object
// holds pc, it has no .eh_frame_hdr with a sorted table (every object the
// GNU and LLVM linkers make has one), or its table has no entry for pc.
const void* find(void* pc, Bases* bases);

}  // namespace fde_lookup
