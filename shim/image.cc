// image: the image's identity and file stem; see image.h.
#include "image.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

namespace image {
namespace {

const char kImageVar[] = "PROFSHIM_IMAGE";

const config::Config* g_cfg;
std::atomic<int> g_pid{0};       // the pid this image profiles as
std::atomic<bool> g_root{true};  // the root process (its final image writes NAME.*)
std::atomic<int> g_root_pid{0};
std::atomic<int> g_gen{0};       // execs this pid has made under the shim
long long g_start_s;             // when the session's root set up (CLOCK_REALTIME, s)
// The stem this image chose at a stop for a stem of its own, kept for its
// later stops (a failed exec resumes the same image).
char g_claimed_base[512], g_claimed_stem[512];

std::string program_name() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "prog";
  buf[n] = 0;
  const char* base = strrchr(buf, '/');
  return config::slug(base ? base + 1 : buf);
}

// Which profiling session an image belongs to: its directory and name. A
// profiled program that starts another with a PROFILE_DIR or PROFILE_NAME
// of its own starts a new session, with a root of its own.
unsigned long long session() {
  unsigned long long h = 1469598103934665603ull;  // FNV-1a
  for (char c : g_cfg->dir + "/" + g_cfg->name) h = (h ^ (unsigned char)c) * 1099511628211ull;
  return h;
}

// ROOTPID is negative when no image of this session may be the root any
// more (no pid matches it).
std::string value(int gen, bool may_be_root = true) {
  char b[128];
  int root = g_root_pid.load();
  if (!may_be_root && root > 0) root = -root;
  snprintf(b, sizeof b, "%d:%d:%d:%016llx:%lld", root, g_pid.load(), gen, session(), g_start_s);
  return b;
}

// An image that wrote only while running (a snapshot, a heap peak) and was
// killed has its rows in <stem>.mem.tsv: one row per file of either kind.
bool taken(const std::string& dir, const std::string& stem) {
  for (const char* kind : {"cpu.pprof", "heap.pprof", "wait.pprof", "heap-peak.pprof", "mem.tsv"})
    if (written_this_session(dir + "/" + stem + "." + kind)) return true;
  return false;
}

}  // namespace

// Written during this session: modified at or after its start. A second of
// margin for file systems whose times are coarser than the clock (a file of
// an earlier session written in the second before this one began is kept
// rather than replaced, which is the safe side).
bool written_this_session(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && (long long)st.st_mtim.tv_sec >= g_start_s - 1;
}

void setup(const config::Config* cfg, pid_t me) {
  g_cfg = cfg;
  g_pid.store(me);
  int root = 0, pid = 0, gen = 0;
  unsigned long long sess = 0;
  long long start = 0;
  const char* v = getenv(kImageVar);
  if (v && sscanf(v, "%d:%d:%d:%llx:%lld", &root, &pid, &gen, &sess, &start) == 5 && root != 0 &&
      sess == session() && start > 0) {
    bool same_pid = pid == me;  // an image after an exec of ours
    g_root_pid.store(root);
    g_gen.store(same_pid ? gen : 0);
    g_root.store(same_pid && root == me);
    g_start_s = start;
  } else {
    g_root_pid.store(me);
    g_gen.store(0);
    g_root.store(true);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    g_start_s = (long long)now.tv_sec;
  }
  g_claimed_base[0] = 0;
  setenv(kImageVar, value(g_gen.load()).c_str(), 1);
}

void after_fork(pid_t me) {
  g_pid.store(me);
  g_root.store(false);
  g_gen.store(0);
  g_claimed_base[0] = 0;  // a new image: the parent's choice is not its own
}

pid_t pid() { return g_pid.load(std::memory_order_relaxed); }

bool root() { return g_root.load(); }

std::string stem(bool as_root) {
  if (as_root) return g_cfg->name;
  std::string s = g_cfg->name + "." + program_name() + "." + std::to_string(g_pid.load());
  if (int gen = g_gen.load()) s += "." + std::to_string(gen);
  return s;
}

std::string stem() { return stem(root()); }

std::string unique_stem(const std::string& dir, const std::string& base) {
  if (base == g_cfg->name) return base;  // the root's final image: NAME, whatever the session
  if (base == g_claimed_base) return g_claimed_stem;
  std::string s = base;
  for (int k = 2; k < 10000 && taken(dir, s); ++k) s = base + "-" + std::to_string(k);
  if (base.size() < sizeof g_claimed_base && s.size() < sizeof g_claimed_stem) {
    memcpy(g_claimed_stem, s.c_str(), s.size() + 1);
    memcpy(g_claimed_base, base.c_str(), base.size() + 1);
  }
  return s;
}

bool env_profiles(char* const envp[]) {
  bool dir = false, preload = false;
  for (char* const* e = envp; e && *e; ++e) {
    if (strncmp(*e, "PROFILE_DIR=", 12) == 0) dir = (*e)[12] != 0;
    if (strncmp(*e, "LD_PRELOAD=", 11) == 0) preload = strstr(*e, "profshim") != nullptr;
  }
  return dir && preload;
}

char** exec_env(char* const envp[], bool may_be_root) {
  // The copy and its marker are this exec's own (another thread may exec at
  // the same time): one block, the pointers first, the marker's text after.
  std::string var = std::string(kImageVar) + "=" + value(g_gen.load() + 1, may_be_root);
  size_t n = 0;
  while (envp && envp[n]) ++n;
  char** env = static_cast<char**>(malloc((n + 2) * sizeof(char*) + var.size() + 1));
  if (!env) return nullptr;
  char* text = reinterpret_cast<char*>(env + n + 2);
  memcpy(text, var.c_str(), var.size() + 1);
  size_t j = 0, len = strlen(kImageVar);
  for (size_t i = 0; i < n; ++i)
    if (strncmp(envp[i], kImageVar, len) != 0 || envp[i][len] != '=') env[j++] = envp[i];
  env[j++] = text;
  env[j] = nullptr;
  return env;
}

}  // namespace image
