// malloc_api: the program's mallctl filter and the check of the program's
// own libjemalloc; see malloc_api.h. When the heap is not profiled the
// next definition serves mallctl as every other call (malloc_jemalloc.cc).
#include "malloc_api.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include <atomic>

#include "alloc_choice.h"
#include "export.h"
#include "jemalloc_raw.h"
#include "real.h"
#include "wrappers.h"

namespace malloc_api {
namespace {

// Set once, before g_claimed, and only read after it.
std::atomic<bool> g_claimed{false};
// No MIB element is SIZE_MAX: one jemalloc could not look up stays unmatched.
size_t g_prof_mib = ~size_t(0);      // "prof" at the top of the MIB tree
size_t g_thread_prof_active_mib[3];  // "thread.prof.active"
size_t g_backtrace_hook_mib[3];      // "experimental.hooks.prof_backtrace"

// prof.* holds every switch of the profile (active, reset and its rate,
// dump, gdump, prefix, thread_active_init); thread.prof.active silences one
// thread; the backtrace hook is where the shim notices a heap peak
// (peak.h). opt.prof* needs nothing: jemalloc refuses writes to opt.* itself.
bool protected_name(const char* name) {
  return name && (strncmp(name, "prof.", 5) == 0 || strcmp(name, "prof") == 0 ||
                  strcmp(name, "thread.prof.active") == 0 || strcmp(name, "experimental.hooks.prof_backtrace") == 0);
}

bool protected_mib(const size_t* mib, size_t len) {
  if (len >= 1 && mib[0] == g_prof_mib) return true;
  if (len >= 3 && memcmp(mib, g_backtrace_hook_mib, sizeof g_backtrace_hook_mib) == 0) return true;
  return len >= 3 && memcmp(mib, g_thread_prof_active_mib, sizeof g_thread_prof_active_mib) == 0;
}

// prof.dump and prof.reset act with no new value, so only a call that
// reads and writes nothing is let through.
bool pure_read(void* oldp, size_t* oldlenp, void* newp, size_t newlen) {
  return oldp && oldlenp && !newp && newlen == 0;
}

bool claimed() { return g_claimed.load(std::memory_order_acquire); }

struct Found {
  char path[512];
};

int find_program_jemalloc(struct dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  const char* base = name ? strrchr(name, '/') : nullptr;
  base = base ? base + 1 : name;
  if (!base || strncmp(base, "libjemalloc", 11) != 0) return 0;
  snprintf(static_cast<Found*>(data)->path, sizeof(Found::path), "%s", name);
  return 1;
}

// "5.3.0-0-g54eaed1..." -> 5; 0 if it does not parse.
unsigned major_of(const char* version) {
  unsigned major = 0;
  return version && sscanf(version, "%u.", &major) == 1 ? major : 0;
}

}  // namespace

void claim_profiling() {
  size_t mib[4], len = 4;
  if (profshim_je_mallctlnametomib("prof.active", mib, &len) == 0) g_prof_mib = mib[0];
  len = 3;
  if (profshim_je_mallctlnametomib("thread.prof.active", g_thread_prof_active_mib, &len) != 0)
    memset(g_thread_prof_active_mib, 0xff, sizeof g_thread_prof_active_mib);
  len = 3;
  if (profshim_je_mallctlnametomib("experimental.hooks.prof_backtrace", g_backtrace_hook_mib, &len) != 0)
    memset(g_backtrace_hook_mib, 0xff, sizeof g_backtrace_hook_mib);
  g_claimed.store(true, std::memory_order_release);
}

bool program_jemalloc_compatible(std::string* err) {
  Found found{};
  if (!dl_iterate_phdr(find_program_jemalloc, &found)) return true;
  // The handle's own mallctl, not the shim's that the program binds to.
  void* h = real::dlopen()(found.path, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return true;
  using Ctl = int (*)(const char*, void*, size_t*, void*, size_t);
  Ctl theirs = reinterpret_cast<Ctl>(dlsym(h, "mallctl"));
  const char* version = nullptr;
  size_t sz = sizeof version;
  // A prefixed build (je_mallctl) is a separate allocator whose names the
  // shim does not take over: nothing to check.
  bool known = theirs && theirs("version", &version, &sz, nullptr, 0) == 0;
  dlclose(h);
  if (!known) return true;
  const char* ours = nullptr;
  sz = sizeof ours;
  jemalloc_raw::ctl("version", &ours, &sz, nullptr, 0);
  // mallocx's flags (MALLOCX_ARENA, MALLOCX_TCACHE) took their present
  // encoding in 4.0; 3.x put the arena where 5.x reads the tcache.
  unsigned major = major_of(version);
  if (major == 4 || major == 5) return true;
  *err = std::string("the program's ") + found.path + " is jemalloc " + version +
         ", whose API differs from the shim's jemalloc " + (ours ? ours : "5") +
         " that serves its calls (mallocx flags, mallctl names): its heap would be profiled wrongly";
  return false;
}

}  // namespace malloc_api

EXPORT PROFSHIM_ALLOC int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen) {
  using namespace malloc_api;
  if (alloc_choice::mode() != alloc_choice::kJemalloc) {
    auto f = alloc_choice::optional().mallctl;
    int r = f ? f(name, oldp, oldlenp, newp, newlen) : ENOENT;
    PROFSHIM_KEEP_FRAME(r);
    return r;
  }
  if (claimed() && !pure_read(oldp, oldlenp, newp, newlen) && protected_name(name)) return EPERM;
  return profshim_je_mallctl(name, oldp, oldlenp, newp, newlen);
}

EXPORT PROFSHIM_ALLOC int mallctlbymib(const size_t* mib, size_t miblen, void* oldp, size_t* oldlenp, void* newp,
                        size_t newlen) {
  using namespace malloc_api;
  if (alloc_choice::mode() != alloc_choice::kJemalloc) {
    auto f = alloc_choice::optional().mallctlbymib;
    int r = f ? f(mib, miblen, oldp, oldlenp, newp, newlen) : ENOENT;
    PROFSHIM_KEEP_FRAME(r);
    return r;
  }
  if (claimed() && !pure_read(oldp, oldlenp, newp, newlen) && protected_mib(mib, miblen)) return EPERM;
  return profshim_je_mallctlbymib(mib, miblen, oldp, oldlenp, newp, newlen);
}
