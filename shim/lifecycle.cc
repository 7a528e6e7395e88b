// lifecycle: setup, the state machine, the stop thread, the bounded stop
// and the image's identity; see lifecycle.h.
#include "lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "atomic_file.h"
#include "config.h"
#include "finish.h"
#include "gzip.h"
#include "heap.h"
#include "real.h"
#include "sampler.h"
#include "signals.h"
#include "symbolize.h"
#include "sys.h"

namespace lifecycle {
namespace {

enum State : int { kInert, kRunning, kStopping, kDone };

// "ROOTPID:PID:GEN:SESSION" in the environment of every profiled image: the
// root process's pid, the pid of the image that set it, how many execs that
// pid has made, and a hash of PROFILE_DIR and PROFILE_NAME. A descendant the
// shim never saw start (posix_spawn, vfork, system) knows from it that it is
// not the root; an exec'd image of the same pid knows its generation, so no
// two images name the same files.
const char kImageVar[] = "PROFSHIM_IMAGE";

std::atomic<int> g_state{kInert};
std::atomic<int> g_pid{0};       // the pid this image profiles as
std::atomic<bool> g_root{true};  // the root process (its final image writes NAME.*)
std::atomic<int> g_root_pid{0};
std::atomic<int> g_gen{0};       // execs this pid has made under the shim
std::atomic<bool> g_main_exited{false};
std::atomic<long> g_threads{0};  // threads started through the shim, alive
pthread_key_t g_thread_key;
char g_timeout_msg[160];
// Futex words: the stop thread sleeps on g_request; stoppers sleep on g_done.
volatile uint32_t g_request = 0;
volatile uint32_t g_done = 0;

// Built on first use (our constructor may run before this file's C++
// initialisers would) and never destroyed: after a stop that timed out, the
// stop thread may still read them while exit() runs the atexit destructors.
config::Config& cfg() {
  static config::Config* c = new config::Config;
  return *c;
}
finish::Context& ctx() {
  static finish::Context* c = new finish::Context;
  return *c;
}

pid_t raw_getpid() { return pid_t(syscall(SYS_getpid)); }

bool vfork_child() { return raw_getpid() != g_pid.load(std::memory_order_relaxed); }

[[noreturn]] void fail(const std::string& why) {
  sys::line(("error: " + why).c_str());
  // Before main: nothing of the program's has run, so nothing to flush.
  syscall(SYS_exit_group, 78);
  __builtin_unreachable();
}

std::string program_name() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "prog";
  buf[n] = 0;
  const char* base = strrchr(buf, '/');
  return config::slug(base ? base + 1 : buf);
}

// "<name>" for the root's final image, "<name>.<prog>.<pid>" for any other,
// with ".<gen>" after an exec of the same pid.
std::string stem(bool root) {
  if (root) return cfg().name;
  std::string s = cfg().name + "." + program_name() + "." + std::to_string(g_pid.load());
  if (int gen = g_gen.load()) s += "." + std::to_string(gen);
  return s;
}

// Which profiling session an image belongs to: its directory and name. A
// profiled program that starts another with a PROFILE_DIR or PROFILE_NAME
// of its own starts a new session, with a root of its own.
unsigned long long session() {
  unsigned long long h = 1469598103934665603ull;  // FNV-1a
  for (char c : cfg().dir + "/" + cfg().name) h = (h ^ (unsigned char)c) * 1099511628211ull;
  return h;
}

std::string image_value(int gen) {
  char b[96];
  snprintf(b, sizeof b, "%d:%d:%d:%016llx", g_root_pid.load(), g_pid.load(), gen, session());
  return b;
}

void read_identity() {
  int root = 0, pid = 0, gen = 0;
  unsigned long long sess = 0;
  const char* v = getenv(kImageVar);
  pid_t me = g_pid.load();
  if (v && sscanf(v, "%d:%d:%d:%llx", &root, &pid, &gen, &sess) == 4 && root > 0 && sess == session()) {
    bool same_pid = pid == me;  // an image after an exec of ours
    g_root_pid.store(root);
    g_gen.store(same_pid ? gen : 0);
    g_root.store(same_pid && root == me);
  } else {
    g_root_pid.store(me);
    g_gen.store(0);
    g_root.store(true);
  }
  setenv(kImageVar, image_value(g_gen.load()).c_str(), 1);
}

// Whether every thread of the program has ended and only the calling one
// (the stop thread) is left.
bool only_thread_left() {
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  const char* t = strstr(buf, "\nThreads:");
  return t && atoi(t + 9) == 1;
}

// The first stop path wins: RUNNING -> STOPPING, and what the stop reports.
bool claim_stop(const char* how) {
  int running = kRunning;
  if (!g_state.compare_exchange_strong(running, kStopping)) return false;
  ctx().how = how;
  ctx().stop_mono_ns = sys::now_ns(CLOCK_MONOTONIC);
  return true;
}

void* stop_thread(void*) {
  prctl(PR_SET_NAME, "profshim-stop", 0, 0, 0);
  heap::set_thread_active(false);
  // Its own arena: a thread stopped inside malloc by a fatal signal holds
  // its arena's lock, and the stop must not wait for that.
  heap::use_private_arena();
  while (!__atomic_load_n(&g_request, __ATOMIC_ACQUIRE)) {
    sys::futex_wait(&g_request, 0, 1000000000ull);
    sys::stderr_poll();
    // Every program thread ended without a stop we saw (a forked child whose
    // thread returned, say): libc ends a process when its last thread ends,
    // and that must not be us. Stop here, then return, and libc exits.
    if (only_thread_left() && claim_stop("the last thread's exit")) break;
  }
  finish::run(ctx());
  g_state.store(kDone);
  __atomic_store_n(&g_done, 1, __ATOMIC_RELEASE);
  sys::futex_wake(&g_done);
  return nullptr;
}

// With every signal blocked, so that no signal meant for the program is
// ever handled on the shim's thread.
std::string spawn_stop_thread() {
  g_request = 0, g_done = 0;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int rc = real::pthread_create()(&t, &attr, stop_thread, nullptr);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return rc == 0 ? "" : std::string("cannot start the stop thread: ") + strerror(rc);
}

void begin_image() {
  ctx().stem = stem(g_root.load());
  ctx().start_mono_ns = sys::now_ns(CLOCK_MONOTONIC);
  ctx().start_real_ns = sys::now_ns(CLOCK_REALTIME);
}

void before_fork() {
  if (g_state.load() == kRunning && cfg().cpu_hz) sampler::quiesce_for_fork();
}

void after_fork_in_parent() {
  if (g_state.load() == kRunning && cfg().cpu_hz) sampler::resume_after_fork_in_parent();
}

// The child of fork profiles itself from here on, as its own image.
void after_fork_in_child() {
  if (g_state.load() != kRunning) {
    g_state.store(kInert);
    return;
  }
  g_pid.store(raw_getpid());
  g_root.store(false);
  g_gen.store(0);
  // The forking thread is the child's only one: if the shim started it, its
  // end is the child's last thread's end.
  bool started = pthread_getspecific(g_thread_key) != nullptr;
  g_threads.store(started ? 1 : 0);
  g_main_exited.store(started);
  begin_image();
  if (cfg().cpu_hz && !signals::sampling_signal_taken()) sampler::reset_after_fork();
  if (!spawn_stop_thread().empty()) {
    g_state.store(kInert);
    return;
  }
  g_state.store(kRunning);
}

// The key's value is the thread's alternate stack if we gave it one, else
// a non-null marker (a destructor runs only for a non-null value).
void on_thread_end(void* v) {
  if (v != reinterpret_cast<void*>(1)) signals::release_altstack(v);
  if (g_threads.fetch_sub(1) == 1 && g_main_exited.load()) stop("the last thread's exit");
}

// Last in line: a stop path the shim did not see (libc's internal exit after
// pthread_exit from main in a thread it did not start, say) still gets its
// profiles, though after the program's own atexit handlers.
void at_exit_fallback() { stop("exit (seen only at atexit)"); }

void setup() {
  std::string err =
      config::parse([](const char* n) -> const char* { return getenv(n); }, &cfg());
  if (!err.empty()) fail(err);
  if (!cfg().active) {
    heap::set_active(false);
    return;
  }
  sys::stderr_init();
  if (!(err = atomic_file::ensure_dir(cfg().dir)).empty()) fail("PROFILE_DIR: " + err);
  // Absolute from here on: the program may chdir before it stops (and the
  // session's identity is computed from it).
  if (char* abs = realpath(cfg().dir.c_str(), nullptr)) {
    cfg().dir = abs;
    free(abs);
  }
  g_pid.store(raw_getpid());
  read_identity();
  ctx().cfg = &cfg();
  begin_image();
  snprintf(g_timeout_msg, sizeof g_timeout_msg,
           "error: the stop did not finish writing within %.1f s; giving up, the process ends as "
           "it would have",
           double(cfg().stop_timeout_ms) / 1000.0);
  if (!symbolize::load_libdw(&err)) fail(err);
  if (!gzip::load(&err)) fail(err);
  if (cfg().heap_sample) {
    if (!heap::available(&err) || !heap::start(cfg().heap_lg_sample, &err)) fail(err);
  } else {
    heap::set_active(false);
  }
  if (cfg().cpu_hz && !sampler::start(cfg().cpu_hz, &err)) fail(err);
  if (!(err = spawn_stop_thread()).empty()) fail(err);
  signals::install(cfg().cpu_hz ? sampler::signal_number() : -1);
  signals::ensure_altstack();  // the main thread's, kept for the process's life
  pthread_key_create(&g_thread_key, on_thread_end);
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
  atexit(at_exit_fallback);
  g_state.store(kRunning);
}

__attribute__((constructor)) void init() {
  real::resolve_all();
  // The shim's own setup allocations are not the program's.
  heap::set_thread_active(false);
  setup();
  heap::set_thread_active(true);
}

// Signal-safe: atomics, futexes and clock_gettime only.
bool request_and_wait(const char* how) {
  if (claim_stop(how)) {
    __atomic_store_n(&g_request, 1, __ATOMIC_RELEASE);
    sys::futex_wake(&g_request);
  } else if (g_state.load() != kStopping) {
    return true;
  }
  uint64_t deadline = sys::now_ns(CLOCK_MONOTONIC) + cfg().stop_timeout_ms * 1000000ull;
  for (;;) {
    if (__atomic_load_n(&g_done, __ATOMIC_ACQUIRE)) return true;
    uint64_t now = sys::now_ns(CLOCK_MONOTONIC);
    if (now >= deadline) break;
    sys::futex_wait(&g_done, 0, deadline - now);
  }
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) sys::line(g_timeout_msg);
  return false;
}

bool env_profiles(char* const envp[]) {
  bool dir = false, preload = false;
  for (char* const* e = envp; e && *e; ++e) {
    if (strncmp(*e, "PROFILE_DIR=", 12) == 0) dir = (*e)[12] != 0;
    if (strncmp(*e, "LD_PRELOAD=", 11) == 0) preload = strstr(*e, "profshim") != nullptr;
  }
  return dir && preload;
}

}  // namespace

bool active() { return g_state.load(std::memory_order_relaxed) == kRunning; }

void stop(const char* how) {
  if (g_state.load() == kInert || vfork_child()) return;
  int saved = errno;  // the program's atexit handlers may look at it
  request_and_wait(how);
  errno = saved;
}

void stop_from_signal(int sig) {
  if (g_state.load() == kInert || vfork_child()) return;
  static const char* const kNames[] = {
      "signal 0",       "signal SIGHUP",  "signal SIGINT",  "signal SIGQUIT", "signal SIGILL",
      "signal SIGTRAP", "signal SIGABRT", "signal SIGBUS",  "signal SIGFPE",  "signal SIGKILL",
      "signal SIGUSR1", "signal SIGSEGV", "signal SIGUSR2", "signal SIGPIPE", "signal SIGALRM",
      "signal SIGTERM", "signal 16",      "signal 17",      "signal 18",      "signal 19",
      "signal 20",      "signal 21",      "signal 22",      "signal 23",      "signal SIGXCPU",
      "signal SIGXFSZ"};
  request_and_wait(sig > 0 && sig < int(sizeof kNames / sizeof kNames[0]) ? kNames[sig] : "a signal");
}

char* const* before_exec(char* const envp[]) {
  int state = g_state.load();
  if (state == kInert || vfork_child()) return envp;
  bool successor = env_profiles(envp);
  // The root's image before an exec is not its final one when what it execs
  // profiles too: that one writes NAME.*.
  if (state == kRunning && g_root.load() && successor) ctx().stem = stem(false);
  // This image's stop, or another thread's already under way: finished
  // either way before the image is replaced.
  request_and_wait("exec");
  // The timers are gone now; a thread-directed sampling signal still
  // pending would survive execve and kill the new image.
  if (cfg().cpu_hz) signals::discard_pending_sampling_signal();
  if (!successor) return envp;
  // The new image is this pid's next generation. The copy and its marker
  // are this exec's own (another thread may exec at the same time): one
  // block, the pointers first, the marker's text after them.
  std::string var = std::string(kImageVar) + "=" + image_value(g_gen.load() + 1);
  size_t n = 0;
  while (envp && envp[n]) ++n;
  char** env = static_cast<char**>(malloc((n + 2) * sizeof(char*) + var.size() + 1));
  if (!env) return envp;
  char* text = reinterpret_cast<char*>(env + n + 2);
  memcpy(text, var.c_str(), var.size() + 1);
  size_t j = 0, len = strlen(kImageVar);
  for (size_t i = 0; i < n; ++i)
    if (strncmp(envp[i], kImageVar, len) != 0 || envp[i][len] != '=') env[j++] = envp[i];
  env[j++] = text;
  env[j] = nullptr;
  return env;
}

bool in_vfork_child() { return g_state.load() != kInert && vfork_child(); }

void exec_failed(char* const envp[], char* const* env) {
  if (env != envp) free(const_cast<char**>(env));
  if (g_state.load() != kDone || vfork_child()) return;
  // Same image, still running: profile on, and its final stop writes again.
  ctx().stem = stem(g_root.load());
  if (cfg().heap_sample) heap::set_active(true);
  if (cfg().cpu_hz && !signals::sampling_signal_taken()) sampler::resume();
  if (spawn_stop_thread().empty()) g_state.store(kRunning);
}

void main_thread_exiting() {
  if (g_state.load() != kRunning || vfork_child()) return;
  // Mark first, then count: a last worker ending in between sees the mark,
  // and the stop is idempotent, so neither order of the two is lost.
  g_main_exited.store(true);
  if (g_threads.load() == 0) stop("pthread_exit from main");
}

void thread_creating() { g_threads.fetch_add(1); }

void thread_create_failed() { g_threads.fetch_sub(1); }

void thread_started() {
  void* alt = signals::ensure_altstack();
  pthread_setspecific(g_thread_key, alt ? alt : reinterpret_cast<void*>(1));
}

}  // namespace lifecycle
