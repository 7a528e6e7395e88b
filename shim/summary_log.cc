// summary_log: PROFILE_LOG's appends; see summary_log.h.
#include "summary_log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
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
  // A regular file only, as the profiles: a FIFO put there would hold the
  // stop in open() (O_NONBLOCK: it fails at once without a reader, and a
  // FIFO with one is refused below), and a symbolic link could send the
  // lines anywhere the program may write.
  int fd = fsroot::open(g_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) return false;
  struct stat st;
  // Whole or not at all: past RLIMIT_FSIZE a part would be a torn line
  // (and the write that crosses it a SIGXFSZ). The raw write: the shim's
  // own wrapper of write() would time it as the program's wait.
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && sys::fsize_room(fd) >= len &&
            sys::write_all(fd, buf, len);
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
