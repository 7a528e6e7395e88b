// alloc_choice: which allocator serves this image's malloc, decided once at
// the first call of any malloc-family function, before it returns
// (docs/ALLOCATOR.md). jemalloc, inside the shim, serves only when the heap
// is profiled; otherwise every call goes to the next definition in lookup
// order (glibc's, or a libjemalloc or libtcmalloc the program links), as if
// the shim were not loaded. The choice never changes in an image: a fork
// child inherits it, an exec'd image makes its own.
#pragma once
#include <stddef.h>

#include "freeze.h"

// After a call to the next allocator's function: the calling function's
// frame stays on the stack until the call returns (no tail jump), so that a
// stop sees that the thread is inside malloc (wrappers.h). Every exported
// allocator function makes its call to the next definition this way. Once
// a stop asks threads to park, a thread parks here, on its way out: one
// that is inside glibc's malloc_trim or mallinfo2 nearly all the time
// (each holds the arena lock over the whole heap) is almost never caught
// outside by the stop's signal.
#define PROFSHIM_KEEP_FRAME(r)                                         \
  do {                                                                 \
    __asm__ volatile("" : "+r"(r));                                    \
    if (__builtin_expect(freeze::requested(), 0)) freeze::after_alloc(); \
  } while (0)
#define PROFSHIM_KEEP_FRAME_VOID()                                     \
  do {                                                                 \
    __asm__ volatile("" ::: "memory");                                 \
    if (__builtin_expect(freeze::requested(), 0)) freeze::after_alloc(); \
  } while (0)

namespace alloc_choice {

enum Mode : int { kUndecided = 0, kNext = 1, kJemalloc = 2 };

// The next definitions of what the shim exports; null where there is none
// (glibc has no mallocx).
struct Next {
  void* (*malloc)(size_t);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void (*free)(void*);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  void* (*pvalloc)(size_t);
  void* (*reallocarray)(void*, size_t, size_t);
  size_t (*malloc_usable_size)(void*);
  void* (*mallocx)(size_t, int);
  void* (*rallocx)(void*, size_t, int);
  size_t (*xallocx)(void*, size_t, size_t, int);
  size_t (*sallocx)(const void*, int);
  void (*dallocx)(void*, int);
  void (*sdallocx)(void*, size_t, int);
  size_t (*nallocx)(size_t, int);
  int (*mallctl)(const char*, void*, size_t*, void*, size_t);
  int (*mallctlnametomib)(const char*, size_t*, size_t*);
  int (*mallctlbymib)(const size_t*, size_t, void*, size_t*, void*, size_t);
  void (*malloc_stats_print)(void (*)(void*, const char*), void*, const char*);
  // tcmalloc's figures (a program linked with it), for NAME.mem.tsv.
  int (*tc_property)(const char*, size_t*);
  void* mallinfo;   // struct mallinfo (*)(void)
  void* mallinfo2;  // struct mallinfo2 (*)(void)
  int (*malloc_trim)(size_t);
  void (*malloc_stats)(void);
  int (*malloc_info)(int, void*);
  // Old names some code calls directly; null where libc has none (then the
  // plain name's next definition serves).
  void* (*libc_malloc)(size_t);
  void* (*libc_calloc)(size_t, size_t);
  void* (*libc_realloc)(void*, size_t);
  void (*libc_free)(void*);
  void* (*libc_memalign)(size_t, size_t);
  void* (*libc_valloc)(size_t);
  void* (*libc_pvalloc)(size_t);
  void (*cfree)(void*);
};

// kUndecided only while the choice is being made (then the caller serves
// from the bootstrap arena).
Mode decide();

namespace detail {
extern int g_mode;
extern Next g_next;
}  // namespace detail

inline Mode mode() {
  int m = __atomic_load_n(&detail::g_mode, __ATOMIC_ACQUIRE);
  if (__builtin_expect(m == kUndecided, 0)) return decide();
  if (m != kNext && m != kJemalloc) __builtin_unreachable();
  return Mode(m);
}

// True if jemalloc serves (the heap is profiled). Decides on first use.
inline bool jemalloc() { return mode() == kJemalloc; }

// Only meaningful when mode() is kNext. The names every glibc defines;
// the others (jemalloc's API, mallinfo2, cfree) through optional().
inline const Next& next() { return detail::g_next; }
// The same with the names glibc may lack looked up too: at the first call
// that needs one, never inside the image's first malloc (alloc_choice.cc).
const Next& optional();

// Memory handed out while the next definitions are being looked up (the
// loader's lookup may allocate): a small static arena that free() ignores.
namespace detail {
extern char g_arena[256 << 10];
}  // namespace detail
// Two compares, inline: free() asks it of every block.
inline bool is_bootstrap(const void* p) {
  return reinterpret_cast<__UINTPTR_TYPE__>(p) - reinterpret_cast<__UINTPTR_TYPE__>(detail::g_arena) <
         sizeof detail::g_arena;
}
void* bootstrap_alloc(size_t n, size_t align);
size_t bootstrap_size(const void* p);

}  // namespace alloc_choice
