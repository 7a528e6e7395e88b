// image: the image's identity and file stem; see image.h.
#include "image.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <vector>

#include "engine.h"
#include "forks.h"
#include "fsroot.h"
#include "gzip.h"
#include "only.h"

namespace image {
namespace {

const char kImageVar[] = "PROFSHIM_IMAGE";

const config::Config* g_cfg;
std::atomic<int> g_pid{0};       // the pid this image profiles as
pid_t g_parent;                  // its parent when it began (getppid() changes once orphaned)
std::atomic<bool> g_root{true};  // the root process (its final image writes NAME.*)
std::atomic<int> g_root_pid{0};
std::atomic<int> g_gen{0};       // execs this pid has made under the shim
long long g_start_s;             // when the session's root set up (CLOCK_REALTIME, s)
int g_root_sid;                  // the root's session id at its setup (0: not known)
// The stem this image chose at a stop for a stem of its own, kept for its
// later stops (a failed exec resumes the same image).
char g_claimed_base[512], g_claimed_stem[512];
uint64_t g_cpu_ns;  // the image's CPU to its last stop, for its files' marker

std::string program_name() {
  char buf[PATH_MAX];
  ssize_t n = fsroot::readlink("/proc/self/exe", buf, sizeof buf - 1);
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
std::atomic<bool> g_sandboxed{false};

std::string value(int gen, bool may_be_root = true) {
  char b[160];
  int root = g_root_pid.load();
  if (!may_be_root && root > 0) root = -root;
  snprintf(b, sizeof b, "%d:%d:%d:%016llx:%lld:%d%s", root, g_pid.load(), gen, session(), g_start_s, g_root_sid,
           g_sandboxed.load() ? ":s" : "");
  return b;
}

std::string exe_path() {
  char buf[PATH_MAX];
  ssize_t n = fsroot::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

// The identity an image writes in each file's gzip header (gzip.h), read
// back before NAME.* is replaced: "profshim session=ROOTPID:START pid=PID
// alt=STEM cpu=NS exe=PATH", ALT the name the image has when it is not the
// root's, NS its CPU to the stop (the summary line's process cpu).
struct Marker {
  std::string session, pid, alt, exe;
  uint64_t cpu_ns = 0;  // 0 also when not recorded (an older profshim's)
};
bool parse_marker(const std::string& c, Marker* m) {
  if (c.compare(0, 17, "profshim session=") != 0) return false;
  size_t sp = c.find(' ', 17), pid = c.find(" pid=", 17), alt = c.find(" alt=", 17), exe = c.find(" exe=", 17);
  if (sp == std::string::npos || pid != sp || alt == std::string::npos || exe == std::string::npos || exe < alt ||
      alt < pid)
    return false;
  size_t cpu = c.find(" cpu=", alt);
  size_t alt_end = cpu < exe ? cpu : exe;
  m->session = c.substr(17, sp - 17);
  m->pid = c.substr(pid + 5, alt - pid - 5);
  m->alt = c.substr(alt + 5, alt_end - alt - 5);
  m->exe = c.substr(exe + 5);
  if (cpu < exe) m->cpu_ns = strtoull(c.c_str() + cpu + 5, nullptr, 10);
  return true;
}
std::string session_tag() { return std::to_string(std::abs(g_root_pid.load())) + ":" + std::to_string(g_start_s); }

// Detached from the root's session (setsid, daemon) after the root has
// gone, and orphaned (its parent gone too, so it was reparented): the
// daemon of a `Type=forking` unit, of `daemonize yes`, the double fork's
// grandchild, a postmaster after pg_ctl. Such an image may take NAME at its
// stop (final_stem: only from a holder that used less CPU). A daemon's own
// children (PostgreSQL's backends, which call setsid themselves; a
// pre-forking server's workers) end while their parent lives: they keep
// their own names (each taking NAME in turn renamed the one before, and
// those ending together lost files).
bool heir() {
  int root = std::abs(g_root_pid.load());
  // getsid answers 0 where the session's leader is outside this pid
  // namespace (a child of `unshare --pid` that did not detach).
  pid_t sid = getsid(0);
  if (g_root.load() || g_root_sid <= 0 || root <= 0 || sid <= 0 || sid == g_root_sid) return false;
  if (getppid() == g_parent) return false;
  return kill(root, 0) != 0 && errno == ESRCH;
}

}  // namespace

// Written during this session: modified at or after its start. A second of
// margin for file systems whose times are coarser than the clock (a file of
// an earlier session written in the second before this one began is kept
// rather than replaced, which is the safe side).
bool written_this_session(const std::string& path) {
  struct stat st;
  return fsroot::lstat(path.c_str(), &st) == 0 && (long long)st.st_mtim.tv_sec >= g_start_s - 1;
}

namespace {

// Any file of an engine's (engine.h's name and also), or <stem>.mem.tsv,
// where an image that wrote only while running (a snapshot, a heap peak)
// and was killed has its rows: one row per file of either kind.
bool taken(const std::string& dir, const std::string& stem) {
  const std::string base = dir + "/" + stem + ".";
  int n = 0;
  const engine::Engine* const* engines = engine::all(&n);
  for (int i = 0; i < n; ++i) {
    if (written_this_session(base + engines[i]->name + ".pprof")) return true;
    for (const char* const* k = engines[i]->also; k && *k; ++k)
      if (written_this_session(base + *k + ".pprof")) return true;
  }
  return written_this_session(base + "mem.tsv");
}

}  // namespace

void setup(const config::Config* cfg, pid_t me) {
  g_cfg = cfg;
  g_pid.store(me);
  g_parent = getppid();
  int root = 0, pid = 0, gen = 0;
  unsigned long long sess = 0;
  long long start = 0;
  int sid = 0;
  const char* v = getenv(kImageVar);
  // A child a Go program started: its marker is in PROFILE_DIR.
  const std::string published = v || !cfg ? std::string() : parents_marker(cfg->dir, g_parent);
  if (!v && !published.empty()) v = published.c_str();
  if (v && sscanf(v, "%d:%d:%d:%llx:%lld:%d", &root, &pid, &gen, &sess, &start, &sid) >= 5 && root != 0 &&
      sess == session() && start > 0) {
    g_root_sid = sid;
    bool same_pid = pid == me;  // an image after an exec of ours
    g_root_pid.store(root);
    g_gen.store(same_pid ? gen : 0);
    g_root.store(same_pid && root == me);
    g_start_s = start;
  } else {
    g_root_pid.store(me);
    g_gen.store(0);
    g_root.store(true);
    g_root_sid = getsid(0);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    g_start_s = (long long)now.tv_sec;
  }
  // Under PROFILE_ONLY the images between are inert and pass no marker on:
  // a chosen image cannot tell the root of the tree from a descendant (nor
  // an exec after an inert image from the first), so none takes NAME; each
  // writes its own stem, made unique within the session (final_stem).
  if (cfg && !cfg->only.empty()) g_root.store(false);
  g_claimed_base[0] = 0;
  setenv(kImageVar, value(g_gen.load()).c_str(), 1);
}

void mark_sandboxed() { g_sandboxed.store(true); }

bool marker_sandboxed(const char* v) {
  // The seventh field; a marker without it (six fields) is not.
  int colons = 0;
  for (const char* p = v; p && *p; ++p)
    if (*p == ':' && ++colons == 6) return strcmp(p + 1, "s") == 0;
  return false;
}

void after_fork(pid_t me) {
  // The parent is the image that forked (its pid is still ours here), not
  // getppid(): a parent that exited before this child first ran (a loaded
  // machine, a daemon's parent returning at once) has left it reparented
  // already, and it would never count itself orphaned (heir()).
  g_parent = g_pid.load();
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
  if (base == g_cfg->name) return base;  // the root's: NAME, whatever the session (final_stem decides at the stop)
  if (base == g_claimed_base) return g_claimed_stem;
  std::string s = base;
  for (int k = 2; k < 10000 && taken(dir, s); ++k) s = base + "-" + std::to_string(k);
  if (base.size() < sizeof g_claimed_base && s.size() < sizeof g_claimed_stem) {
    memcpy(g_claimed_stem, s.c_str(), s.size() + 1);
    memcpy(g_claimed_base, base.c_str(), base.size() + 1);
  }
  return s;
}

std::string final_stem(const std::string& dir, const std::string& base, uint64_t cpu_ns) {
  g_cpu_ns = cpu_ns;
  const std::string& name = g_cfg->name;
  bool as_heir = base != name && base == stem(false) && heir();
  if (base != name && !as_heir) return unique_stem(dir, base);
  const std::string me = exe_path(), tag = session_tag(), my_pid = std::to_string(g_pid.load());
  // The stop's files of every engine looked at before any is renamed:
  // this image takes all of NAME.* or none of it.
  int n = 0;
  const engine::Engine* const* engines = engine::all(&n);
  std::vector<Marker> m(static_cast<size_t>(n));
  std::vector<char> marked(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    const char* kind = engines[i]->name;
    marked[i] = parse_marker(gzip::header_comment(dir + "/" + name + "." + kind + ".pprof"), &m[i]);
    if (!marked[i]) continue;  // none, or an older profshim's: replaced
    // Another session's root that was another program (a unit's
    // ExecStopPost=/bin/rm after its daemon): its files stay, this image
    // writes under its own name.
    if (m[i].session != tag && m[i].exe != me) return unique_stem(dir, stem(false));
    // A root (or an earlier heir) that used at least this image's CPU did
    // the run's work: Erlang's erl_child_setup, ending just after BEAM and
    // reaped after it, took BEAM's NAME in 11 runs of 20. A daemon's parent
    // lives a millisecond and yields to it.
    if (as_heir && m[i].session == tag && m[i].pid != my_pid && m[i].cpu_ns >= cpu_ns)
      return unique_stem(dir, stem(false));
  }
  for (int i = 0; i < n; ++i) {
    if (!marked[i]) continue;
    const char* kind = engines[i]->name;
    std::string path = dir + "/" + name + "." + kind + ".pprof";
    // Another image of this session wrote it (the root, before a daemon
    // takes NAME; a daemon, before a root that outlived it): renamed to
    // the name it would have had, so taking NAME loses nothing.
    if (m[i].session == tag && m[i].pid != my_pid && !m[i].alt.empty() && m[i].alt != name &&
        m[i].alt.find('/') == std::string::npos) {
      std::string alt = m[i].alt;
      for (int k = 2; k < 10000 && fsroot::access((dir + "/" + alt + "." + kind + ".pprof").c_str(), F_OK) == 0; ++k)
        alt = m[i].alt + "-" + std::to_string(k);
      fsroot::rename(path.c_str(), (dir + "/" + alt + "." + kind + ".pprof").c_str());
    }
  }
  return name;
}

std::string marker() {
  return "profshim session=" + session_tag() + " pid=" + std::to_string(g_pid.load()) + " alt=" + stem(false) +
         " cpu=" + std::to_string(g_cpu_ns) + forks::marker_field() + " exe=" + exe_path();
}

bool env_profiles(char* const envp[], const char* path, const char* argv0) {
  bool dir = false, preload = false;
  const char* only_list = nullptr;
  for (char* const* e = envp; e && *e; ++e) {
    if (strncmp(*e, "PROFILE_DIR=", 12) == 0) dir = (*e)[12] != 0;
    if (strncmp(*e, "LD_PRELOAD=", 11) == 0) preload = strstr(*e, "profshim") != nullptr;
    if (strncmp(*e, "PROFILE_ONLY=", 13) == 0) only_list = *e + 13;
  }
  return dir && preload && only::selects_exec(only_list, path, argv0);
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
