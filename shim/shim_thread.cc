// shim_thread: starting a thread of the shim's own; see shim_thread.h.
#include "shim_thread.h"

#include <pthread.h>
#include <signal.h>

#include "glibc_compat.h"
#include "heap.h"
#include "real.h"

namespace shim_thread {

void work_mask(sigset_t* mask) {
  sigfillset(mask);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(mask, s);
}

bool spawn(void* (*fn)(void*), void* arg) {
  sigset_t mask;
  work_mask(&mask);
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  // This may run on a program's thread (a stop; the worker started from the
  // allocation path), and glibc allocates the attribute's mask (and the
  // thread's own bookkeeping): live while the heap is dumped, so not
  // sampled as the program's.
  const bool was = heap::swap_thread_active(false);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, kStack);
  pthread_t t;
  int rc = glibc_compat::create_masked(real::pthread_create(), &t, &attr, &mask, fn, arg);
  pthread_attr_destroy(&attr);
  heap::set_thread_active(was);
  return rc == 0;
}

void enter_allocator() {
  heap::set_thread_active(false);
  heap::use_private_arena();
}

}  // namespace shim_thread
