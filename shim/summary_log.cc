// summary_log: PROFILE_LOG's appends; see summary_log.h.
#include "summary_log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "errline.h"
#include "fsroot.h"
#include "sys.h"

namespace summary_log {
namespace {

// Set at setup, read at stops (any thread, a watchdog's handler).
char g_path[PATH_MAX];

bool append(const char* text) {
  if (!g_path[0]) return false;
  char buf[errline::kLineMax];
  size_t len = errline::format(text, buf);
  int fd = fsroot::open(g_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) return false;
  // Whole or not at all: past RLIMIT_FSIZE a part would be a torn line
  // (and the write that crosses it a SIGXFSZ).
  bool ok = sys::fsize_room(fd) >= len && write(fd, buf, len) == ssize_t(len);
  close(fd);
  return ok;
}

}  // namespace

void setup(const std::string& dir, const std::string& log) {
  std::string path = log.empty() || log[0] == '/' ? log : dir + "/" + log;
  if (path.size() >= sizeof g_path) path.clear();
  memcpy(g_path, path.c_str(), path.size() + 1);
}

void line(const char* text, bool on_stderr) {
  const int saved = errno;
  if (!append(text) || on_stderr) errline::line(text);
  errno = saved;
}

}  // namespace summary_log
