// hooks: every libc symbol the shim interposes for the stop paths and for
// thread starts, each a thin wrapper: pass straight through when inert,
// otherwise call into lifecycle / sampler and then the original (real.h).
// The allocator's symbols are in allocator.cc.
#include <stdint.h>
#include <stdlib.h>

#include "lifecycle.h"
#include "real.h"
#include "sampler.h"
#include "wrappers.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Main = int (*)(int, char**, char**);
Main g_main;

// Sits between libc and main: returning from main lands here, before libc
// calls exit() internally (an interposed exit never sees that path) and so
// before any atexit handler or static destructor of the program.
PROFSHIM_WRAPPER int main_wrapper(int argc, char** argv, char** envp) {
  int rc = g_main(argc, argv, envp);
  lifecycle::stop("return from main");
  return rc;
}

struct Start {
  void* (*fn)(void*);
  void* arg;
};

PROFSHIM_WRAPPER void* thread_start(void* p) {
  Start s = *static_cast<Start*>(p);
  free(p);
  sampler::thread_begin();
  return s.fn(s.arg);
}

}  // namespace

extern "C" char __start_profshim_wrap[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_profshim_wrap[] __attribute__((weak, visibility("hidden")));

namespace wrappers {
uint64_t begin() { return uint64_t(__start_profshim_wrap); }
uint64_t end() { return uint64_t(__stop_profshim_wrap); }
}  // namespace wrappers

EXPORT int __libc_start_main(Main main, int argc, char** argv, void (*init)(), void (*fini)(),
                             void (*rtld_fini)(), void* stack_end) {
  if (!lifecycle::active()) return real::libc_start_main()(main, argc, argv, init, fini, rtld_fini, stack_end);
  g_main = main;
  return real::libc_start_main()(main_wrapper, argc, argv, init, fini, rtld_fini, stack_end);
}

EXPORT void exit(int status) noexcept {
  lifecycle::stop("exit");
  real::exit()(status);
  __builtin_unreachable();
}

EXPORT void quick_exit(int status) noexcept {
  lifecycle::stop("quick_exit");
  real::quick_exit()(status);
  __builtin_unreachable();
}

EXPORT int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  if (!sampler::running()) return real::pthread_create()(t, attr, fn, arg);
  Start* s = static_cast<Start*>(malloc(sizeof(Start)));
  if (!s) return real::pthread_create()(t, attr, fn, arg);
  *s = {fn, arg};
  int rc = real::pthread_create()(t, attr, thread_start, s);
  if (rc != 0) free(s);
  return rc;
}
