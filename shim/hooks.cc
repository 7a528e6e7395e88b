// hooks: the libc symbols the shim interposes for the stop paths, exec and
// thread starts, each a thin wrapper: pass straight through when inert,
// otherwise call into lifecycle and then the original (real.h). The signal
// API's wrappers are in hooks_signal.cc, the descriptor calls' in
// hooks_fd.cc, the allocator's symbols in allocator.cc.
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elf.h>
#include <link.h>

#include <atomic>
#include <string>

#include "alloc_choice.h"
#include "errline.h"
#include "export.h"
#include "glibc_compat.h"
#include "heap.h"
#include "image.h"
#include "lifecycle.h"
#include "real.h"
#include "sandbox.h"
#include "recover.h"
#include "sampler.h"
#include "sigmask.h"
#include "stackwalk.h"
#include "unload.h"
#include "wrappers.h"

namespace {

using Main = int (*)(int, char**, char**);
Main g_main;

// Sits between libc and main: returning from main lands here, before libc
// calls exit() internally (an interposed exit never sees that path) and so
// before any atexit handler or static destructor of the program.
PROFSHIM_WRAPPER int main_wrapper(int argc, char** argv, char** envp) {
  sampler::main_begins(reinterpret_cast<void*>(g_main));
  int rc = g_main(argc, argv, envp);
  lifecycle::stop("return from main");
  return rc;
}

struct Start {
  void* (*fn)(void*);
  void* arg;
  uint64_t view;  // the creator's view of the signals the shim keeps out of masks
  bool profiled;
  stackwalk::ThreadStack stack;
};

// Threads started through here and alive now (heap.h, share_main_arena);
// a thread leaves the count when it returns or calls pthread_exit.
std::atomic<long> g_live_threads{0};
__thread bool t_counted;

void thread_leaves() {
  if (t_counted) g_live_threads.fetch_sub(1, std::memory_order_relaxed);
  t_counted = false;
  lifecycle::thread_ending();
}

PROFSHIM_WRAPPER void* thread_start(void* p) {
  Start s = *static_cast<Start*>(p);
  free(p);
  if (s.profiled) {
    glibc_compat::refresh_if_stale();  // (a new thread holds no lock of the program's)
    stackwalk::note_new_thread_stack(s.stack);
    lifecycle::thread_started(s.view, reinterpret_cast<void*>(s.fn));
  }
  t_counted = true;
  if (g_live_threads.fetch_add(1, std::memory_order_relaxed) == 0) heap::share_main_arena();
  void* rv = s.fn(s.arg);
  thread_leaves();
  return rv;
}

bool runnable(int dirfd, const char* path) {
  struct stat st;
  return path && faccessat(dirfd, path, X_OK, AT_EACCESS) == 0 && fstatat(dirfd, path, &st, 0) == 0 &&
         S_ISREG(st.st_mode);
}

// What an exec would run: `path` when it is an executable file (a shell
// searching PATH calls execve once per directory, and a path that is not one
// fails without a stop: the stop costs milliseconds), else "".
struct Target {
  bool found = false;
  char path[4096] = "";  // "" when only a descriptor names it
};

Target at(int dirfd, const char* path) {
  Target t;
  t.found = runnable(dirfd, path);
  if (t.found && dirfd == AT_FDCWD && strlen(path) < sizeof t.path) strcpy(t.path, path);
  return t;
}

Target by_descriptor() {
  Target t;
  t.found = true;
  return t;
}

// What execvp's search finds (glibc's: PATH, else /bin:/usr/bin; an empty
// entry is the current directory): a command that is nowhere fails as it
// does without the shim, with no stop.
Target in_path(const char* file) {
  if (!file || !*file) return Target();
  if (strchr(file, '/')) return at(AT_FDCWD, file);
  const char* path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  size_t flen = strlen(file);
  Target t;
  for (const char* p = path;; ++p) {
    const char* end = strchrnul(p, ':');
    size_t dlen = size_t(end - p);
    if (dlen + flen + 2 <= sizeof t.path) {
      memcpy(t.path, p, dlen);
      size_t n = dlen;
      if (n) t.path[n++] = '/';
      memcpy(t.path + n, file, flen + 1);
      if (runnable(AT_FDCWD, t.path)) {
        t.found = true;
        return t;
      }
    }
    if (!*end) return Target();
    p = end;
  }
}

// An ELF executable with no interpreter: LD_PRELOAD cannot reach it.
bool statically_linked(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  ElfW(Ehdr) eh;
  bool is_static = false;
  if (pread(fd, &eh, sizeof eh, 0) == ssize_t(sizeof eh) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(ElfW(Phdr)) && eh.e_phnum < 256) {
    ElfW(Phdr) ph[256];
    size_t bytes = sizeof(ElfW(Phdr)) * eh.e_phnum;
    if (pread(fd, ph, bytes, off_t(eh.e_phoff)) == ssize_t(bytes)) {
      is_static = true;
      for (int i = 0; i < eh.e_phnum; ++i) is_static = is_static && ph[i].p_type != PT_INTERP;
    }
  }
  close(fd);
  return is_static;
}

// The old image's profiles before the exec; profiling resumes if it fails.
template <typename Find, typename Call>
int around_exec(Find target_now, char* const argv[], char* const envp[], Call call) {
  if (!lifecycle::profiling()) return call(envp);
  Target t = target_now();
  if (!t.found) return call(envp);
  const char* argv0 = argv ? argv[0] : nullptr;
  char* const* env = lifecycle::before_exec(envp, t.path, argv0);
  // A profiled environment handed to a program the shim cannot enter would
  // leave nothing, silently: one line says so. A warning, not an error:
  // nothing failed, the exec goes on, and the files written are whole.
  // Not in a vfork child: the check allocates, in the parent's heap.
  if (t.path[0] && !lifecycle::in_vfork_child() && image::env_profiles(envp, t.path, argv0) &&
      statically_linked(t.path)) {
    std::string msg = std::string("warning: ") + t.path +
                      " is statically linked: LD_PRELOAD cannot reach it, so its image is not profiled";
    errline::line(msg.c_str());
  }
  int rc = call(env);
  int saved = errno;
  lifecycle::exec_failed(envp, env);
  errno = saved;
  return rc;
}

// execl's variadic arguments as an argv (the list ends with a null).
#define COLLECT_ARGV(first, argv, after)                          \
  size_t argc_ = 1;                                               \
  {                                                               \
    va_list ap;                                                   \
    va_start(ap, first);                                          \
    while (va_arg(ap, char*)) ++argc_;                            \
    va_end(ap);                                                   \
  }                                                               \
  char* argv[argc_ + 1];                                          \
  {                                                               \
    va_list ap;                                                   \
    va_start(ap, first);                                          \
    argv[0] = const_cast<char*>(first);                           \
    for (size_t i = 1; i <= argc_; ++i) argv[i] = va_arg(ap, char*); \
    after;                                                        \
    va_end(ap);                                                   \
  }

}  // namespace

extern "C" char __start_profshim_wrap[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_profshim_wrap[] __attribute__((weak, visibility("hidden")));

extern "C" char __start_profshim_alloc[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_profshim_alloc[] __attribute__((weak, visibility("hidden")));

extern "C" char __start_profshim_heapprof[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_profshim_heapprof[] __attribute__((weak, visibility("hidden")));

extern "C" char __start_profshim_wait[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_profshim_wait[] __attribute__((weak, visibility("hidden")));

namespace wrappers {
uint64_t begin() { return uint64_t(__start_profshim_wrap); }
uint64_t end() { return uint64_t(__stop_profshim_wrap); }
uint64_t alloc_begin() { return uint64_t(__start_profshim_alloc); }
uint64_t alloc_end() { return uint64_t(__stop_profshim_alloc); }
uint64_t heap_profiling_begin() { return uint64_t(__start_profshim_heapprof); }
uint64_t heap_profiling_end() { return uint64_t(__stop_profshim_heapprof); }
bool in_wait(uint64_t pc) { return pc >= uint64_t(__start_profshim_wait) && pc < uint64_t(__stop_profshim_wait); }
}  // namespace wrappers

// --- process start and stop -------------------------------------------------

EXPORT int __libc_start_main(Main main, int argc, char** argv, void (*init)(), void (*fini)(),
                             void (*rtld_fini)(), void* stack_end) {
  if (!lifecycle::active()) return real::libc_start_main()(main, argc, argv, init, fini, rtld_fini, stack_end);
  g_main = main;
  return real::libc_start_main()(main_wrapper, argc, argv, init, fini, rtld_fini, stack_end);
}

// A library the shim uses that ends the process itself (libdw's
// out-of-memory path is error(EXIT_FAILURE, ...)) would end it from inside
// the stop, with its status, while the stop waits for itself: the stop ends
// instead, with its one line.
void not_inside_the_stop(const char* what) {
  if (recover::active()) recover::fail(what);
}

EXPORT void exit(int status) noexcept {
  not_inside_the_stop("exit() was called inside the stop");
  lifecycle::stop("exit");
  real::exit()(status);
  __builtin_unreachable();
}

EXPORT void quick_exit(int status) noexcept {
  not_inside_the_stop("quick_exit() was called inside the stop");
  lifecycle::stop("quick_exit");
  real::quick_exit()(status);
  __builtin_unreachable();
}

EXPORT void _exit(int status) {
  not_inside_the_stop("_exit() was called inside the stop");
  lifecycle::stop("_exit");
  real::_exit()(status);
  __builtin_unreachable();
}

EXPORT void _Exit(int status) noexcept {
  not_inside_the_stop("_Exit() was called inside the stop");
  lifecycle::stop("_Exit");
  real::_Exit()(status);
  __builtin_unreachable();
}

// libdw reports a failed allocation with error(EXIT_FAILURE, ENOMEM, "libdw"):
// a line of its own on stderr ("prog: libdw: Cannot allocate memory"), a
// flush of the program's stdout from the stop thread, and exit(1) racing the
// program's own exit. Inside the shim's own work it ends that work through
// its recovery point instead, printing nothing; anywhere else it is glibc's
// error(), given the message formatted here (the same text: "%m" and all).
EXPORT void error(int status, int errnum, const char* fmt, ...) {
  if (recover::active()) recover::fail(errnum == ENOMEM ? "out of memory" : "a library the stop uses failed");
  va_list ap;
  va_start(ap, fmt);
  char* msg = nullptr;
  int n = vasprintf(&msg, fmt, ap);
  va_end(ap);
  if (n < 0) {
    real::error()(status, errnum, "%s", "(message lost: out of memory)");
    return;
  }
  real::error()(status, errnum, "%s", msg);
  free(msg);
}

// A failed assert() in a library the stop uses (libdw's, out of memory)
// prints its message before its abort(): inside the stop, neither.
EXPORT void __assert_fail(const char* assertion, const char* file, unsigned line, const char* function) {
  if (recover::active()) recover::fail("a library the stop uses failed an assertion");
  real::assert_fail()(assertion, file, line, function);
  __builtin_unreachable();
}

// --- exec ------------------------------------------------------------------

EXPORT int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  return around_exec([&] { return at(AT_FDCWD, path); }, argv, envp,
                     [&](char* const* env) { return real::execve()(path, argv, env); });
}

EXPORT int execv(const char* path, char* const argv[]) noexcept {
  return around_exec([&] { return at(AT_FDCWD, path); }, argv, environ,
                     [&](char* const* env) { return real::execve()(path, argv, env); });
}

EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  return around_exec([&] { return in_path(file); }, argv, envp,
                     [&](char* const* env) { return real::execvpe()(file, argv, env); });
}

EXPORT int execvp(const char* file, char* const argv[]) noexcept {
  return around_exec([&] { return in_path(file); }, argv, environ,
                     [&](char* const* env) { return real::execvpe()(file, argv, env); });
}

EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
  // Its file is the descriptor's: no path to look into, but something to run.
  return around_exec(by_descriptor, argv, envp,
                     [&](char* const* env) { return real::fexecve()(fd, argv, env); });
}

EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) noexcept {
  if (!real::execveat()) {
    errno = ENOSYS;
    return -1;
  }
  return around_exec([&] { return (flags & AT_EMPTY_PATH) ? by_descriptor() : at(dirfd, path); }, argv, envp,
                     [&](char* const* env) { return real::execveat()(dirfd, path, argv, env, flags); });
}

EXPORT int execl(const char* path, const char* arg, ...) noexcept {
  COLLECT_ARGV(arg, argv, (void)0);
  return execve(path, argv, environ);
}

EXPORT int execlp(const char* file, const char* arg, ...) noexcept {
  COLLECT_ARGV(arg, argv, (void)0);
  return execvpe(file, argv, environ);
}

EXPORT int execle(const char* path, const char* arg, ...) noexcept {
  char* const* envp;
  COLLECT_ARGV(arg, argv, envp = va_arg(ap, char* const*));
  return execve(path, argv, envp);
}

// --- threads ---------------------------------------------------------------

// A thread goes through thread_start when the image is profiled (its
// timer, its view of the masks, its end) or the shim's jemalloc serves it
// (a thread alone shares the main thread's arena, heap.h). Otherwise only
// the room the shim's thread-local storage takes from a small stack is
// given back.
EXPORT int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  bool profiled = lifecycle::active();
  if (!profiled && !alloc_choice::jemalloc()) {
    pthread_attr_t roomier;
    return real::pthread_create()(t, stackwalk::with_room(attr, &roomier, false), fn, arg);
  }
  bool was = profiled && heap::swap_thread_active(false);  // the shim's block, not the program's
  Start* s = static_cast<Start*>(malloc(sizeof(Start)));
  if (profiled) heap::set_thread_active(was);
  if (!s) return real::pthread_create()(t, attr, fn, arg);
  pthread_attr_t roomier;
  const pthread_attr_t* used = stackwalk::with_room(attr, &roomier, profiled);
  *s = {fn, arg, profiled ? sigmask::view_bits() : 0, profiled, {0, 0}};
  if (profiled) s->stack = stackwalk::stack_of(used);
  if (profiled) lifecycle::thread_creating();
  int rc = real::pthread_create()(t, used, thread_start, s);
  if (rc != 0) {
    if (profiled) lifecycle::thread_create_failed();
    free(s);
  }
  return rc;
}

EXPORT void pthread_exit(void* rv) {
  if (lifecycle::profiling() && !sandbox::getpid_forbidden() && getpid() == gettid()) lifecycle::main_thread_exiting();
  thread_leaves();
  real::pthread_exit()(rv);
  __builtin_unreachable();
}

// --- libraries ---------------------------------------------------------------

EXPORT int dlclose(void* handle) noexcept {
  if (lifecycle::active()) unload::before_dlclose(handle);
  const int rc = real::dlclose()(handle);
  glibc_compat::refresh_objects();
  return rc;
}
