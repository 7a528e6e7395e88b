// malloc_glibc: glibc's malloc introspection (mallinfo, mallinfo2,
// malloc_trim, malloc_stats, malloc_info). When the next allocator serves
// the image (alloc_choice.h) each is the next definition's, unchanged.
// When jemalloc serves, each is answered by it: glibc's own would describe
// its heap, which nothing allocates from. Each field keeps the meaning glibc's manual gives
// it; docs/ALLOCATOR.md maps them. mallopt is not ours: glibc's answers
// every option as it would (jemalloc has no run-time equivalent of any).
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc_choice.h"
#include "export.h"
#include "glibc_compat.h"
#include "jemalloc_raw.h"
#include "wrappers.h"

namespace {

// MALLCTL_ARENAS_ALL: the merged statistics of every arena.
const unsigned kAll = 4096;

size_t arena_stat(unsigned arena, const char* leaf) {
  char name[96];
  snprintf(name, sizeof name, "stats.arenas.%u.%s", arena, leaf);
  return jemalloc_raw::stat(name);
}

// Unused pages jemalloc keeps mapped with memory behind them, which a purge
// returns to the kernel: glibc's "releasable" space.
size_t purgeable_bytes() {
  return (arena_stat(kAll, "pdirty") + arena_stat(kAll, "pmuzzy")) * size_t(sysconf(_SC_PAGESIZE));
}

struct FreeBlocks {
  size_t count = 0, bytes = 0;
};

// Free regions in the slabs of small size classes: jemalloc's nearest
// thing to glibc's free chunks. each(size, free regions) per class.
template <typename Each>
FreeBlocks free_regions(unsigned arena, Each each) {
  FreeBlocks fb;
  unsigned nbins = 0;
  size_t sz = sizeof nbins;
  if (jemalloc_raw::ctl("arenas.nbins", &nbins, &sz, nullptr, 0) != 0) return fb;
  for (unsigned j = 0; j < nbins; ++j) {
    char name[96];
    snprintf(name, sizeof name, "arenas.bin.%u.size", j);
    size_t size = jemalloc_raw::stat(name);
    uint32_t nregs = 0;
    sz = sizeof nregs;
    snprintf(name, sizeof name, "arenas.bin.%u.nregs", j);
    jemalloc_raw::ctl(name, &nregs, &sz, nullptr, 0);
    snprintf(name, sizeof name, "stats.arenas.%u.bins.%u.nslabs", arena, j);
    size_t slabs = jemalloc_raw::stat(name);
    snprintf(name, sizeof name, "stats.arenas.%u.bins.%u.curregs", arena, j);
    size_t used = jemalloc_raw::stat(name);
    size_t total = slabs * nregs;
    if (total <= used) continue;
    fb.count += total - used;
    fb.bytes += (total - used) * size;
    each(size, total - used);
  }
  return fb;
}

struct mallinfo2 info() {
  jemalloc_raw::refresh();
  struct mallinfo2 mi;
  memset(&mi, 0, sizeof mi);
  size_t mapped = jemalloc_raw::stat("stats.mapped");
  size_t allocated = jemalloc_raw::stat("stats.allocated");
  // Every block, however large, is carved from an arena's extents: there
  // are no separately mmapped chunks (hblks, hblkhd) and no fastbins
  // (smblks, fsmblks); usmblks is always 0 in glibc too.
  mi.arena = mapped;
  mi.uordblks = allocated;
  mi.fordblks = mapped > allocated ? mapped - allocated : 0;
  mi.keepcost = purgeable_bytes();
  mi.ordblks = free_regions(kAll, [](size_t, size_t) {}).count;
  return mi;
}

// The arenas in use, as glibc lists its own.
template <typename Each>
void each_arena(Each each) {
  unsigned n = 0;
  size_t sz = sizeof n;
  jemalloc_raw::ctl("arenas.narenas", &n, &sz, nullptr, 0);
  for (unsigned i = 0, nr = 0; i < n; ++i) {
    char name[64];
    bool init = false;
    sz = sizeof init;
    snprintf(name, sizeof name, "arena.%u.initialized", i);
    if (jemalloc_raw::ctl(name, &init, &sz, nullptr, 0) != 0 || !init) continue;
    each(i, nr++);
  }
}

// The next allocator's function of that type, if it serves and has one.
template <typename F>
F theirs(void* fn) {
  return alloc_choice::mode() != alloc_choice::kJemalloc ? reinterpret_cast<F>(fn) : nullptr;
}

}  // namespace

EXPORT_ALLOC struct mallinfo2 mallinfo2(void) {
  if (alloc_choice::mode() != alloc_choice::kJemalloc) {
    // A glibc older than 2.33 has no mallinfo2: zeros, as a reader of it
    // on such a system would get from nothing.
    auto f = theirs<struct mallinfo2 (*)(void)>(alloc_choice::optional().mallinfo2);
    struct mallinfo2 r = {};
    if (f) r = f();
    PROFSHIM_KEEP_FRAME_VOID();
    return r;
  }
  return info();
}

// glibc truncates to int here too: that is why mallinfo2 exists.
EXPORT_ALLOC struct mallinfo mallinfo(void) {
  if (alloc_choice::mode() != alloc_choice::kJemalloc) {
    auto f = theirs<struct mallinfo (*)(void)>(alloc_choice::next().mallinfo);
    struct mallinfo r = {};
    if (f) r = f();
    PROFSHIM_KEEP_FRAME_VOID();
    return r;
  }
  struct mallinfo2 m2 = info();
  struct mallinfo m;
  m.arena = int(m2.arena);
  m.ordblks = int(m2.ordblks);
  m.smblks = int(m2.smblks);
  m.hblks = int(m2.hblks);
  m.hblkhd = int(m2.hblkhd);
  m.usmblks = int(m2.usmblks);
  m.fsmblks = int(m2.fsmblks);
  m.uordblks = int(m2.uordblks);
  m.fordblks = int(m2.fordblks);
  m.keepcost = int(m2.keepcost);
  return m;
}

// glibc: 1 if memory was released to the system, else 0. The pad (space to
// keep at the top of the heap) has no meaning for extents; the calling
// thread's cache is flushed first so its cached blocks can be purged too.
EXPORT_ALLOC int malloc_trim(size_t pad) {
  if (alloc_choice::mode() != alloc_choice::kJemalloc) {
    auto f = alloc_choice::next().malloc_trim;
    int r = f ? f(pad) : 0;
    PROFSHIM_KEEP_FRAME(r);
    return r;
  }
  jemalloc_raw::ctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
  jemalloc_raw::refresh();
  size_t before = purgeable_bytes();
  char name[32];
  snprintf(name, sizeof name, "arena.%u.purge", kAll);
  jemalloc_raw::ctl(name, nullptr, nullptr, nullptr, 0);
  return before > 0;
}

// glibc's layout, on stderr as glibc's; one "Arena" per jemalloc arena.
EXPORT_ALLOC void malloc_stats(void) {
  if (alloc_choice::mode() != alloc_choice::kJemalloc) {
    if (auto f = alloc_choice::next().malloc_stats) f();
    PROFSHIM_KEEP_FRAME_VOID();
    return;
  }
  jemalloc_raw::refresh();
  each_arena([](unsigned i, unsigned nr) {
    fprintf(stderr, "Arena %u:\n", nr);
    fprintf(stderr, "system bytes     = %10zu\n", arena_stat(i, "mapped"));
    fprintf(stderr, "in use bytes     = %10zu\n",
            arena_stat(i, "small.allocated") + arena_stat(i, "large.allocated"));
  });
  fprintf(stderr, "Total (incl. mmap):\n");
  fprintf(stderr, "system bytes     = %10zu\n", jemalloc_raw::stat("stats.mapped"));
  fprintf(stderr, "in use bytes     = %10zu\n", jemalloc_raw::stat("stats.allocated"));
  fprintf(stderr, "max mmap regions = %10u\n", 0u);
  fprintf(stderr, "max mmap bytes   = %10lu\n", 0ul);
}

// glibc's XML (malloc version="1"): a <heap> per arena, whose <sizes> are
// the free regions of each small size class. jemalloc keeps no high-water
// mark of its mappings, so "max" is the current figure.
EXPORT_ALLOC int malloc_info(int options, FILE* fp) {
  if (alloc_choice::mode() != alloc_choice::kJemalloc) {
    auto f = alloc_choice::next().malloc_info;
    int r = f ? f(options, fp) : EINVAL;
    PROFSHIM_KEEP_FRAME(r);
    return r;
  }
  if (options != 0) return EINVAL;
  jemalloc_raw::refresh();
  fprintf(fp, "<malloc version=\"1\">\n");
  FreeBlocks all;
  size_t system = 0;
  each_arena([&](unsigned i, unsigned nr) {
    fprintf(fp, "<heap nr=\"%u\">\n<sizes>\n", nr);
    FreeBlocks fb = free_regions(i, [&](size_t size, size_t n) {
      fprintf(fp, "  <size from=\"%zu\" to=\"%zu\" total=\"%zu\" count=\"%zu\"/>\n", size, size, size * n, n);
    });
    size_t mapped = arena_stat(i, "mapped");
    fprintf(fp,
            "</sizes>\n<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
            "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n"
            "<system type=\"current\" size=\"%zu\"/>\n<system type=\"max\" size=\"%zu\"/>\n"
            "<aspace type=\"total\" size=\"%zu\"/>\n<aspace type=\"mprotect\" size=\"%zu\"/>\n</heap>\n",
            fb.count, fb.bytes, mapped, mapped, mapped, mapped);
    all.count += fb.count;
    all.bytes += fb.bytes;
    system += mapped;
  });
  fprintf(fp,
          "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
          "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n"
          "<total type=\"mmap\" count=\"0\" size=\"0\"/>\n"
          "<system type=\"current\" size=\"%zu\"/>\n<system type=\"max\" size=\"%zu\"/>\n"
          "<aspace type=\"total\" size=\"%zu\"/>\n<aspace type=\"mprotect\" size=\"%zu\"/>\n</malloc>\n",
          all.count, all.bytes, system, system, system, system);
  return 0;
}
