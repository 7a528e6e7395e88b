// glibc_compat: one library for glibc 2.31 to 2.41. Built on a newer
// glibc, the link would bind symbol versions a Debian 11 host lacks
// ("version GLIBC_2.3x not found": the program never starts). The Makefile
// wraps (--wrap) every function that would bind a version newer than 2.31
// onto its old version (glibc_compat.cc); what has no old version is a
// stand-in here, or looked up at run time (docs/DESIGN.md "Which glibc");
// scripts/check-glibc-versions holds the library to it.
#pragma once

#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>

// Older headers (glibc 2.31) lack these.
#ifndef SYS_close_range
#define SYS_close_range 436  // the same on every architecture
#endif
#if !__GLIBC_PREREQ(2, 33)
struct mallinfo2 {  // as glibc 2.33 declares it
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
#endif

namespace glibc_compat {

// The newest glibc symbol version the library may bind.
constexpr int kMaxMajor = 2, kMaxMinor = 31;

// In the constructor, before any thread of the shim's: looks up the calls
// newer than 2.31 the shim uses where present (absent, it does without:
// nothing it needs is among them; what it needs, real::resolve_all checks).
void init();
// init()'s part for dl_find_object below.
void objects_init();

// pthread_create with the new thread's signal mask `mask`: set on the
// attribute where libc can (pthread_attr_setsigmask_np, 2.32), else blocked
// in the creating thread around the create (the new thread inherits it)
// and restored. `attr` is the caller's, initialised.
using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
int create_masked(CreateFn create, pthread_t* t, pthread_attr_t* attr, const sigset_t* mask,
                  void* (*fn)(void*), void* arg);

// struct dl_find_object as glibc 2.35 lays it out (older headers lack it).
struct FoundObject {
  unsigned long long flags;
  void* map_start;
  void* map_end;
  struct link_map* link_map;
  void* eh_frame;
  unsigned long long reserved[7];
};

// _dl_find_object: libc's (2.35; no lock) where there is one, else found
// in the table refresh_objects() made (no lock; async-signal-safe), or for
// a pc it lacks in the loader's list (below): 0, or -1 if no object there
// holds pc.
int dl_find_object(void* pc, FoundObject* result);
// Before 2.35, the loaded objects' table dl_find_object reads, made again:
// at init and after each dlopen and dlclose (never in a handler: it takes
// the loader's lock). A no-op where libc has _dl_find_object.
void refresh_objects();
// A dlopen is about to load objects, or a walk met a pc in none: the next
// refresh_if_stale() (at a thread's start, where no lock of the program's
// is held) makes the table again.
void mark_stale();
void refresh_if_stale();
// Before 2.35, dl_find_object reads the loader's list for a pc in no object
// of the table (loaded since it was made), never waiting for the loader's
// list lock: find_loader_lock (init() calls it) finds that lock among the
// loader's globals, and live_lookups() says whether it was found.
void find_loader_lock();
bool live_lookups();
// This thread holds the loader's list lock (inside a dl_iterate_phdr
// callback, or the loader's own work): a thread the stop must not park,
// since the stop's own loading of libraries would wait on it. False where
// the lock was not found. Signal-safe.
bool holds_loader_lock();

}  // namespace glibc_compat
