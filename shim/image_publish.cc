// image_publish: the marker of a program whose children cannot inherit it
// through the environment; see image.h.
//
// Go copies its environment from the process's stack when it starts and
// builds its children's from that copy: the PROFSHIM_IMAGE setup adds
// through libc's environ never reaches them, and its os/exec starts them
// with its own execve. Each child then took itself for the root, wrote
// NAME.* over the Go program's (a crawler's run.cpu.pprof became the last
// /bin/true's) and renamed the Go program's to NAME.PROG.PID. Such a
// program publishes its marker in PROFILE_DIR instead, with its start time,
// and an image with no marker of its own reads its parent's there.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include "atomic_file.h"
#include "fsroot.h"
#include "image.h"
#include "sys.h"

namespace image {
namespace {

char g_published[4096];  // the file's path, while it stands ("" else)
pid_t g_published_by;     // the image that wrote it (a fork child has the path too)

std::string file_for(pid_t pid) { return ".profshim-image." + std::to_string(pid); }

// The process's start time in clock ticks since boot (/proc's stat, field
// 22): with the pid, which process it is; "" if unreadable.
std::string start_ticks(pid_t pid) {
  char ticks[32];
  return sys::stat_field(pid, 22, ticks, sizeof ticks) ? std::string(ticks) : std::string();
}

}  // namespace

void publish_for_children(const std::string& dir, const char* marker) {
  const std::string ticks = start_ticks(getpid());
  if (!marker || ticks.empty()) return;
  const std::string name = file_for(getpid());
  const std::string path = dir + "/" + name;
  if (path.size() < sizeof g_published && atomic_file::write(dir, name, std::string(marker) + "\n" + ticks + "\n").empty())
    memcpy(g_published, path.c_str(), path.size() + 1), g_published_by = image::pid();
}

void unpublish() {
  if (!g_published[0]) return;
  if (g_published_by == image::pid()) fsroot::unlink(g_published);
  g_published[0] = 0;
}

std::string parents_marker(const std::string& dir, pid_t parent) {
  if (parent <= 1) return std::string();
  // A directory others may write (1777): only a small regular file of this
  // user's, read at once (a FIFO planted there would block the start, a
  // symlink to /dev/zero read for ever).
  const std::string path = dir + "/" + file_for(parent);
  int fd = fsroot::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::string();
  char buf[256];
  struct stat st;
  ssize_t n = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_size < off_t(sizeof buf))
    n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return std::string();
  const std::string text(buf, size_t(n));
  size_t nl = text.find('\n');
  if (nl == std::string::npos || nl == 0) return std::string();
  // A process that died and whose pid another took left it: not this parent's.
  const std::string ticks = text.substr(nl + 1, text.find('\n', nl + 1) - nl - 1);
  if (ticks.empty() || ticks != start_ticks(parent)) return std::string();
  return text.substr(0, nl);
}

}  // namespace image
