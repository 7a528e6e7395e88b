// symbolize_libdw: elfutils' libdw, dlopen()ed (RTLD_LOCAL) when profiling
// needs it (setup.cc says when), and the table of its functions the
// symbolizer calls through (symbolize_internal.h).
#include <dlfcn.h>
#include <time.h>

#include <atomic>
#include <string>

#include "real.h"
#include "symbolize.h"
#include "stackwalk.h"
#include "symbolize_internal.h"

namespace symbolize {
namespace internal {

static Dw g_dw;
enum State : int {
  kUnloaded,
  kLoading,
  kLoaded,
  // Not to be loaded in this image: forked while another thread loaded it
  // (the loader's state in the child is that thread's, half-done).
  kNotHere,
  // Not loaded, and a fork under way: a load waits for it (it would start
  // after the fork's check).
  kForking,
};
static std::atomic<int> g_dw_state{kUnloaded};
const Dw& dw() { return g_dw; }

}  // namespace internal

bool load_libdw(std::string* err) {
  // The snapshot worker, a program thread's first pthread_create and a stop
  // may ask at once: one loads, the others wait for it (a dlopen takes a
  // fraction of a millisecond; at most 2 s).
  // A stop on this thread while it loads would wait for itself.
  stackwalk::Holding loading;
  for (int waited = 0;; ++waited) {
    int state = internal::g_dw_state.load(std::memory_order_acquire);
    if (state == internal::kLoaded) return true;
    if (state == internal::kNotHere) {
      if (err) *err = "libdw.so.1 was being loaded by another thread when this process was forked";
      return false;
    }
    if (state == internal::kUnloaded && internal::g_dw_state.compare_exchange_strong(state, internal::kLoading)) break;
    if (waited == 2000) {
      if (err) *err = "libdw.so.1 was still being loaded by another thread after 2 s";
      return false;
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, nullptr);
  }
  void* h = real::dlopen()("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (err) *err = std::string("cannot load libdw.so.1 (Debian package libdw1; libdw1t64 from Debian 13 on): ") + dlerror();
    internal::g_dw_state.store(internal::kUnloaded);
    return false;
  }
  internal::Dw t;
  const char* missing = nullptr;
#define PROFSHIM_DW_LOAD(f)                                        \
  t.f = reinterpret_cast<decltype(t.f)>(dlsym(h, #f));            \
  if (!t.f && !missing) missing = #f;
  PROFSHIM_DW_FUNCTIONS(PROFSHIM_DW_LOAD)
#undef PROFSHIM_DW_LOAD
  if (missing) {
    if (err) *err = std::string("libdw.so.1 has no ") + missing + " (elfutils too old?)";
    dlclose(h);
    internal::g_dw_state.store(internal::kUnloaded);
    return false;
  }
  internal::g_dw = t;
  internal::g_dw_state.store(internal::kLoaded, std::memory_order_release);
  return true;
}

void libdw_before_fork() {
  for (int waited = 0; waited < 1000; ++waited) {
    int state = internal::g_dw_state.load(std::memory_order_acquire);
    if (state != internal::kLoading &&
        (state != internal::kUnloaded || internal::g_dw_state.compare_exchange_strong(state, internal::kForking)))
      return;
    if (state == internal::kLoading) {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, nullptr);
    }
  }
}

void libdw_after_fork_in_parent() {
  int forking = internal::kForking;
  internal::g_dw_state.compare_exchange_strong(forking, internal::kUnloaded);
}

void libdw_after_fork_in_child() {
  int forking = internal::kForking, loading = internal::kLoading;
  if (!internal::g_dw_state.compare_exchange_strong(forking, internal::kUnloaded))
    internal::g_dw_state.compare_exchange_strong(loading, internal::kNotHere);
}

}  // namespace symbolize
