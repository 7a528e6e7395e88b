// atomic_file: directory creation and tmp+rename writes; see atomic_file.h.
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

namespace atomic_file {

ssize_t (*write_fn)(int, const void*, size_t) = ::write;
int (*fsync_fn)(int) = ::fsync;

namespace {

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
    int fd = open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    *err = errno;
    if (errno != EEXIST) return -1;
  }
  return -1;
}

bool write_all(int fd, const std::string& data, int* err) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = write_fn(fd, data.data() + off, data.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *err = w < 0 ? errno : ENOSPC;
      return false;
    }
    off += size_t(w);
  }
  return true;
}

}  // namespace

std::string ensure_dir(const std::string& dir) {
  std::string path;
  size_t i = 0;
  while (i <= dir.size()) {
    size_t j = dir.find('/', i);
    if (j == std::string::npos) j = dir.size();
    path = dir.substr(0, j);
    i = j + 1;
    if (path.empty()) continue;
    if (mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) return why("cannot create", path, errno);
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return why("cannot use", dir, errno);
  if (!S_ISDIR(st.st_mode)) return "cannot use " + dir + ": not a directory";
  std::string tmp;
  int err = 0;
  int fd = create_temp(dir, "profshim-probe", &tmp, &err);
  if (fd < 0) return why("cannot write in", dir, err);
  close(fd);
  unlink(tmp.c_str());
  return "";
}

std::string write(const std::string& dir, const std::string& name, const std::string& data) {
  std::string tmp, target = dir + "/" + name;
  int err = 0;
  int fd = create_temp(dir, name, &tmp, &err);
  if (fd < 0) return why("cannot create a temporary for", target, err);
  bool ok = write_all(fd, data, &err);
  if (ok && fsync_fn(fd) != 0) ok = false, err = errno;
  if (close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && rename(tmp.c_str(), target.c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    unlink(tmp.c_str());
    return why("cannot write", target, err);
  }
  return "";
}

}  // namespace atomic_file
