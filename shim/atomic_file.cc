// atomic_file: directory creation and tmp+rename writes; see atomic_file.h.
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "fsroot.h"
#include "sys.h"

namespace atomic_file {

ssize_t (*write_fn)(int, const void*, size_t) = ::write;
int (*open_fn)(const char*, int, mode_t) = [](const char* p, int f, mode_t m) { return fsroot::open(p, f, m); };

namespace {

// Files and directories the shim creates are never group- or world-writable,
// whatever the program's umask (a stricter umask still applies).
constexpr mode_t kFileMode = 0644, kDirMode = 0755;

// The temporary being written, so that a stop that gave up can remove it
// (the process may end before the writer would have), and the writer's
// phase: a temporary is created and a rename happens only while nobody gave
// up, and a stop that gives up waits for either to finish (a temporary
// created but not yet noted would outlive an _exit).
enum Phase : int { kIdle = 0, kRenaming, kAbandoned, kCreating };
struct InFlight {
  std::atomic<int> phase;
  std::atomic<pid_t> writer;  // the thread creating or renaming
  std::atomic<uint32_t> seq;  // odd while path is being written
  char path[4096];
};
InFlight g_inflight;

constexpr int kMaxRenamed = 4;
struct Renamed {
  std::atomic<int> n;
  char path[kMaxRenamed][1024];
};
Renamed g_renamed;

void note_renamed(const std::string& target) {
  int i = g_renamed.n.load(std::memory_order_relaxed);
  if (i >= kMaxRenamed || target.size() >= sizeof g_renamed.path[0]) return;
  memcpy(g_renamed.path[i], target.c_str(), target.size() + 1);
  g_renamed.n.store(i + 1, std::memory_order_release);
}

void note_temp(const std::string& tmp) {
  g_inflight.seq.fetch_add(1, std::memory_order_acq_rel);
  size_t n = tmp.size() < sizeof g_inflight.path - 1 ? tmp.size() : sizeof g_inflight.path - 1;
  memcpy(g_inflight.path, tmp.data(), n);
  g_inflight.path[n] = 0;
  g_inflight.seq.fetch_add(1, std::memory_order_release);
}

void forget_temp() {
  g_inflight.seq.fetch_add(1, std::memory_order_acq_rel);
  g_inflight.path[0] = 0;
  g_inflight.seq.fetch_add(1, std::memory_order_release);
}

uid_t g_setup_euid;  // the identity setup made or checked PROFILE_DIR as

std::string why(const char* what, const std::string& path, int err) {
  return std::string(what) + " " + path + ": " + strerror(err);
}

// Creates a unique hidden temporary beside the target. The name carries 64
// random bits, so neither a stale temporary from a killed run nor names
// planted by someone else in a shared directory can block it.
int create_temp(const std::string& dir, const std::string& name, std::string* tmp, int* err) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r)
      r = uint64_t(getpid()) * 0x9e3779b97f4a7c15ull ^ uint64_t(clock()) ^ uint64_t(attempt);
    char suffix[64];
    // "<dir>/.<name>.tmp.<pid>.<16 hex digits>"
    snprintf(suffix, sizeof suffix, ".tmp.%d.%016llx", int(getpid()), (unsigned long long)r);
    *tmp = dir + "/." + name + suffix;
    // Noted before it exists: a stop that gives up while this thread is
    // held here (a throttled process, past abandon()'s 50 ms) removes it by
    // this name.
    note_temp(*tmp);
    int fd = open_fn(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kFileMode);
    if (fd >= 0) return fd;
    *err = errno;
    if (errno != EEXIST) return -1;
  }
  return -1;
}

bool write_all(int fd, const std::string& data, int* err) {
  size_t off = 0, room = sys::fsize_room(fd);
  while (off < data.size()) {
    if (off >= room) {
      *err = EFBIG;
      return false;
    }
    size_t n = data.size() - off < room - off ? data.size() - off : room - off;
    ssize_t w = write_fn(fd, data.data() + off, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *err = w < 0 ? errno : ENOSPC;
      return false;
    }
    off += size_t(w);
  }
  return true;
}

// Running as root, a directory on the way that another user owns (or a
// symlink of theirs) lets that user point the profiles anywhere: refused, the
// rule sshd's StrictModes and systemd-tmpfiles apply.
std::string check_owners(const std::string& dir) {
  if (geteuid() != 0) return "";
  std::string abs = dir;
  if (abs.empty() || abs[0] != '/') {
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return why("cannot use", dir, errno);
    abs = std::string(cwd) + "/" + dir;
  }
  for (size_t j = abs.find('/', 1);; j = abs.find('/', j + 1)) {
    std::string prefix = abs.substr(0, j);
    struct stat st;
    if (lstat(prefix.c_str(), &st) == 0 && st.st_uid != 0)
      return "refusing " + prefix + ": owned by uid " + std::to_string(st.st_uid) +
             ", not root, while running as root (that user could redirect the profiles)";
    if (j == std::string::npos) break;
  }
  return "";
}

// Whether creating a file in dir, which access() allows, is sure to work on
// the file system it is on: a disk or memory file system mounted read-write.
// There the probe file is skipped: on a build's hundreds of images it cost
// an inode created and deleted each (ext4 without a journal then skips every
// inode deleted in the last minute or more at each later creation in its
// group). Elsewhere
// (/proc, sysfs, a FUSE mount, a file system access() is not the whole story
// for) a file is created and removed to find out. What access() cannot see
// (an LSM's path rules, a full disk or quota) is then the stop's error line.
bool plainly_writable(const std::string& dir) {
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) != 0 || (fs.f_flags & ST_RDONLY)) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0xEF53:      // ext2/3/4
    case 0x58465342:  // xfs
    case 0x9123683E:  // btrfs
    case 0x01021994:  // tmpfs
    case 0x794C7630:  // overlayfs
    case 0xF2F52010:  // f2fs
    case 0x2FC12FC1:  // zfs
      return true;
    default:
      return false;
  }
}

// Takes the phase from idle to `to` for this thread; false once a stop gave
// up. Another writer's phase (a snapshot's beside the stop's) lasts
// microseconds: waited for, at most 50 ms.
bool enter(int to) {
  for (int i = 0; i < 500; ++i) {
    int idle = kIdle;
    if (g_inflight.phase.compare_exchange_strong(idle, to)) {
      g_inflight.writer.store(gettid());
      return true;
    }
    if (idle == kAbandoned) return false;
    struct timespec ts = {0, 100000};
    nanosleep(&ts, nullptr);
  }
  return false;
}

// Back to idle, unless a stop gave up meanwhile (after its 50 ms): that stays.
bool leave(int from) { return g_inflight.phase.compare_exchange_strong(from, kIdle); }

}  // namespace

std::string ensure_dir(const std::string& dir) {
  g_setup_euid = geteuid();
  std::string owners = check_owners(dir);  // before anything is created there
  if (!owners.empty()) return owners;
  std::string path;
  size_t i = 0;
  while (i <= dir.size()) {
    size_t j = dir.find('/', i);
    if (j == std::string::npos) j = dir.size();
    path = dir.substr(0, j);
    i = j + 1;
    if (path.empty()) continue;
    if (mkdir(path.c_str(), kDirMode) != 0 && errno != EEXIST) return why("cannot create", path, errno);
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return why("cannot use", dir, errno);
  if (!S_ISDIR(st.st_mode)) return "cannot use " + dir + ": not a directory";
  // Any doubt (access() refused, or failed as under a seccomp filter that
  // predates faccessat2) and the probe decides.
  if (faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) == 0 && plainly_writable(dir)) return "";
  std::string tmp;
  int err = 0;
  int fd = create_temp(dir, "profshim-probe", &tmp, &err);
  forget_temp();
  if (fd < 0) return why("cannot write in", dir, err);
  close(fd);
  fsroot::unlink(tmp.c_str());
  return "";
}

std::string passwd_name(const std::string& text, uid_t uid) {
  std::string want = std::to_string(uid);
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    // name:password:uid:...
    size_t c1 = text.find(':', at), c2 = c1 < end ? text.find(':', c1 + 1) : std::string::npos;
    size_t c3 = c2 < end ? text.find(':', c2 + 1) : std::string::npos;
    if (c3 < end && c1 > at && text.compare(c2 + 1, c3 - c2 - 1, want) == 0) return text.substr(at, c1 - at);
    at = end + 1;
  }
  return "";
}

std::string running_as() {
  uid_t uid = geteuid();
  std::string name = passwd_name(sys::read_file("/etc/passwd"), uid);
  return name.empty() ? "(running as uid " + std::to_string(uid) + ")"
                      : "(running as user " + name + ", uid " + std::to_string(uid) + ")";
}

std::string write(const std::string& dir, const std::string& name, const std::string& data) {
  std::string tmp, target = dir + "/" + name;
  if (g_inflight.phase.load() == kAbandoned) return "the stop gave up before " + target + " was written";
  int err = 0;
  if (!enter(kCreating)) return "the stop gave up before " + target + " was written";
  int fd = create_temp(dir, name, &tmp, &err);
  if (!leave(kCreating)) {  // a stop gave up meanwhile: it may have unlinked before the file existed
    if (fd >= 0) close(fd), fsroot::unlink(tmp.c_str());
    forget_temp();
    return "the stop gave up before " + target + " was written";
  }
  if (fd < 0) {
    forget_temp();
    std::string w = why("cannot create a temporary for", target, err);
    // A daemon that dropped privileges since setup (setuid to its own
    // user): the directory setup made or found is the old identity's.
    // Said once: the stop's other files fail alike.
    static std::atomic<bool> said{false};
    if ((err == EACCES || err == EPERM) && geteuid() != g_setup_euid && !said.exchange(true))
      w += " (the process runs as uid " + std::to_string(geteuid()) + " now, uid " + std::to_string(g_setup_euid) +
           " at its start: PROFILE_DIR must be writable by the user it changes to)";
    return w;
  }
  bool ok = write_all(fd, data, &err);
  if (close(fd) != 0 && ok) ok = false, err = errno;
  bool may_rename = ok && enter(kRenaming);
  if (may_rename) {
    if (fsroot::rename(tmp.c_str(), target.c_str()) != 0)
      ok = false, err = errno;
    else
      note_renamed(target);
    leave(kRenaming);
  }
  if (!ok || !may_rename) fsroot::unlink(tmp.c_str());
  forget_temp();
  if (!ok) return why("cannot write", target, err);
  if (!may_rename) return "the stop gave up before " + target + " was written";
  return "";
}

void abandon() {
  // A temporary's creation or a rename under way takes microseconds, unless
  // the file system hangs: at most 50 ms, and not at all when the writer is
  // this very thread (a watchdog that interrupted it there).
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int idle = kIdle;
    if (g_inflight.phase.compare_exchange_strong(idle, kAbandoned) || idle == kAbandoned) break;
    if (g_inflight.writer.load() == gettid()) break;
    struct timespec now, ts = {0, 100000};
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) > 50000000L) break;
    nanosleep(&ts, nullptr);
  }
  g_inflight.phase.store(kAbandoned);
  char path[sizeof g_inflight.path];
  uint32_t s1 = g_inflight.seq.load(std::memory_order_acquire);
  memcpy(path, g_inflight.path, sizeof path);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (!(s1 & 1) && g_inflight.seq.load(std::memory_order_relaxed) == s1 && path[0]) fsroot::unlink(path);
}

void reset() {
  g_renamed.n.store(0);
  g_inflight.phase.store(kIdle);
}

void stop_writes() { g_renamed.n.store(0); }

int renamed_count() { return g_renamed.n.load(std::memory_order_acquire); }

const char* renamed_path(int i) { return i >= 0 && i < renamed_count() ? g_renamed.path[i] : ""; }

}  // namespace atomic_file
