// setup: the shim's one constructor. Reads the configuration and, when
// profiling is asked for, sets everything up before main: the directory,
// the image's identity, the symbolizer and gzip, the engines, the signals,
// then the state machine (lifecycle.h) and the snapshot worker
// (snapshot.h). Fail-fast: a setup error is one "# profshim: error:" line
// and exit status 78, before any of the program's code has run.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "atomic_file.h"
#include "config.h"
#include "engine.h"
#include "errline.h"
#include "glibc_compat.h"
#include "go_runtime.h"
#include "forks.h"
#include "gzip.h"
#include "heap.h"
#include "image.h"
#include "lifecycle.h"
#include "only.h"
#include "own_signal.h"
#include "real.h"
#include "recover.h"
#include "session_env.h"
#include "sigmask.h"
#include "signals.h"
#include "shim_thread.h"
#include "snapshot.h"
#include "stack.h"
#include "stackwalk.h"
#include "summary_log.h"
#include "symbolize.h"
#include "sys.h"

namespace {

// Built on first use (our constructor may run before this file's C++
// initialisers would) and never destroyed: after a stop that timed out, the
// stop thread may still read it while exit() runs the atexit destructors.
config::Config& cfg() {
  static config::Config* c = new config::Config;
  return *c;
}

[[noreturn]] void fail(const std::string& why) {
  errline::line(("error: " + why).c_str());
  // Before main: nothing of the program's has run, so nothing to flush.
  sys::exit_group(78);
  __builtin_unreachable();
}

// Milliseconds as the seconds a user writes: 10000 -> "10", 280 -> "0.28".
void seconds_text(uint64_t ms, char* out, size_t cap) {
  snprintf(out, cap, "%llu.%03llu", (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000));
  size_t n = strlen(out);
  while (out[n - 1] == '0') out[--n] = 0;
  if (out[n - 1] == '.') out[n - 1] = 0;
}

// The original the constructor found this libc to lack (real::resolve_all):
// a reason setup fails for, only when profiling.
const char* g_missing_original;

void setup(void*) {
  std::string err = config::parse([](const char* n) -> const char* { return getenv(n); }, &cfg());
  if (!err.empty()) fail(err);
  // An image exec'd under a seccomp filter that forbids the shim's calls
  // (its predecessor saw the filter go in; this one cannot): inert.
  // PROFILE_ONLY: an image of another program is inert, as if PROFILE_DIR
  // were unset (its allocator was chosen so at its first malloc).
  if (!cfg().active || image::marker_sandboxed(getenv("PROFSHIM_IMAGE")) || !only::selected(cfg())) {
    heap::set_active(false);
    return;
  }
  errline::init();
  if (g_missing_original)
    fail(std::string("this libc lacks ") + g_missing_original +
         ", which the shim passes calls on to: it cannot run here (glibc 2.31 or newer is needed)");
  if (!(err = atomic_file::ensure_dir(cfg().dir)).empty())
    fail("PROFILE_DIR: " + err + " " + atomic_file::running_as());
  // Absolute from here on: the program may chdir before it stops (and the
  // session's identity is computed from it).
  if (char* abs = realpath(cfg().dir.c_str(), nullptr)) {
    cfg().dir = abs;
    free(abs);
  }
  session_env::pass_on_absolute(cfg().dir);
  summary_log::setup(cfg().dir, cfg().log);
  image::setup(&cfg(), pid_t(syscall(SYS_getpid)));
  forks::setup(&cfg());
  // A misspelt variable would be ignored in silence: named once, by the root.
  std::string unknown = config::unknown_vars(environ);
  if (!unknown.empty() && image::root())
    errline::line(("warning: not a profshim variable, ignored: " + unknown + " (see docs/CONFIG.md)").c_str());
  // A Go program's own exit is a system call: caught before anything runs Go code.
  const char* go_why = nullptr;
  if (go_runtime::detect() && !go_runtime::setup(cfg().stop_timeout_ms, &go_why))
    errline::line((std::string("warning: a Go program whose exit the shim cannot catch (") + go_why +
                   "): its profiles are written at a signal's stop or PROFILE_INTERVAL's snapshots only")
                      .c_str());
  // Go builds its children's environment from its own copy, made before
  // this image's marker was set: they find the marker in PROFILE_DIR.
  if (go_runtime::is_go()) image::publish_for_children(cfg().dir, getenv("PROFSHIM_IMAGE"));
  if (sys::memory_limited()) stack::reserve(shim_thread::kStack);
  stackwalk::prime();
  stackwalk::note_unsafe_code();
  // zlib first: libdw needs it too, and whoever loads it first decides its
  // binding (gzip.cc loads it deep-bound).
  if (!gzip::load(&err)) fail(err);
  // libdw (0.3 ms) only where a stop may meet other threads: a stop's
  // dlopen holds the loader's locks, which those threads' unwinding takes.
  // An image that stays single-threaded (most of a build's) loads it at its
  // stop, and only when the symbol cache lacks an address; one that starts
  // a thread, at its first (lifecycle::thread_creating).
  // Under a memory limit too: by its stop a program may have used all the
  // address space it may have, and libdw's segments would not map.
  if ((!sys::single_threaded() || sys::memory_limited()) && !symbolize::load_libdw(&err)) fail(err);
  if (!own_signal::install(&err)) fail(err);
  sigmask::setup(own_signal::number());
  // Backwards (engine.h's all()): the CPU profiler last.
  int n = 0;
  const engine::Engine* const* engines = engine::all(&n);
  for (int i = n - 1; i >= 0; --i)
    if (!engines[i]->start(cfg(), &err)) fail(err);
  if (!signals::install(cfg().snapshot_signal) && cfg().snapshot_signal)
    errline::line("warning: PROFILE_SNAPSHOT_SIGNAL: this process started with that signal ignored, "
                  "and it stays ignored: no snapshot by signal");
  signals::ensure_altstack();  // the main thread's, kept for the process's life (no thread end)
  char timeout[32];
  seconds_text(cfg().stop_timeout_ms, timeout, sizeof timeout);
  uint64_t start = lifecycle::start(&cfg(), timeout);
  // After the state machine runs: the worker works only while it does.
  if (!snapshot::setup(&cfg(), start, &err)) fail(err);
}

__attribute__((constructor)) void init() {
  g_missing_original = real::resolve_all();
  glibc_compat::init();
  // The shim's own setup allocations are not the program's.
  heap::set_thread_active(false);
  const char* why = nullptr;
  if (!recover::run(setup, nullptr, &why)) fail(std::string("setup failed: ") + why);
  heap::set_thread_active(true);
}

}  // namespace
