// symbolize_perfmap: see symbolize_perfmap.h.
#include "symbolize_perfmap.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iterator>

#include "fsroot.h"
#include "sys.h"

namespace symbolize {

namespace {
// A JIT that ran for days writes a long map; past this much the rest is
// left unread (its code is named as code of no file, as without a map).
constexpr size_t kMaxBytes = size_t(64) << 20;
}  // namespace

// A later line wins over every earlier one it overlaps: the JIT reused
// that memory.
void PerfMap::add(uint64_t start, uint64_t end, std::string name) {
  auto it = by_start_.lower_bound(start);
  if (it != by_start_.begin() && std::prev(it)->second.end > start) --it;
  while (it != by_start_.end() && it->first < end) it = by_start_.erase(it);
  by_start_[start] = Code{end, std::move(name)};
}

void PerfMap::load() {
  loaded_ = true;
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%d.map", int(getpid()));
  int fd = fsroot::open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    close(fd);
    return;
  }
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0 || text.size() + size_t(n) > kMaxBytes) break;
    text.append(buf, size_t(n));
  }
  close(fd);
  size_t at = 0;
  while (at < text.size()) {
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos) break;  // a line being written: not whole yet
    const char* line = text.c_str() + at;
    char* rest = nullptr;
    uint64_t start = strtoull(line, &rest, 16);
    char* after_size = nullptr;
    uint64_t size = rest && *rest == ' ' ? strtoull(rest + 1, &after_size, 16) : 0;
    if (after_size && *after_size == ' ' && size > 0 && start + size > start) {
      size_t name_at = size_t(after_size + 1 - text.c_str());
      if (name_at < eol) add(start, start + size, text.substr(name_at, eol - name_at));
    }
    at = eol + 1;
  }
}

const std::string* PerfMap::find(uint64_t pc) {
  if (!loaded_) load();
  auto it = by_start_.upper_bound(pc);
  if (it == by_start_.begin()) return nullptr;
  --it;
  return pc < it->second.end ? &it->second.name : nullptr;
}

}  // namespace symbolize
