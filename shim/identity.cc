// identity: the image's pid, parent, executable, command line, start; see
// identity.h.
#include "identity.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fsroot.h"
#include "sys.h"

namespace identity {
namespace {

// An argument as a shell would need it to read back as one word.
void append_arg(std::string* out, const char* a, size_t n) {
  bool plain = n > 0;
  for (size_t i = 0; i < n && plain; ++i)
    plain = (a[i] >= 'a' && a[i] <= 'z') || (a[i] >= 'A' && a[i] <= 'Z') || (a[i] >= '0' && a[i] <= '9') ||
            strchr("-_./=:,+%@", a[i]);
  if (!out->empty()) *out += ' ';
  if (plain) {
    out->append(a, n);
    return;
  }
  *out += '\'';
  for (size_t i = 0; i < n; ++i) {
    if (a[i] == '\'') *out += "'\\''";
    else if (a[i] == '\n') *out += "\\n";
    else *out += a[i];
  }
  *out += '\'';
}

// Cuts at a character boundary of UTF-8 at most max bytes, marking the cut.
std::string cut(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

}  // namespace

std::string iso_utc(uint64_t real_ns) {
  // Days to a civil date (H. Hinnant's algorithm): gmtime_r takes glibc's
  // time zone lock, which a frozen thread may hold at a fatal stop.
  int64_t secs = int64_t(real_ns / 1000000000ull);
  int64_t days = secs / 86400, rem = secs % 86400;
  int64_t z = days + 719468, era = z / 146097, doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
  int64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9, y = yoe + era * 400 + (m <= 2);
  char b[48];
  snprintf(b, sizeof b, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03lluZ", (long long)y, (long long)m,
           (long long)d, (long long)(rem / 3600), (long long)(rem / 60 % 60), (long long)(rem % 60),
           (unsigned long long)(real_ns / 1000000 % 1000));
  return b;
}

std::string argv_text(const std::string& raw) {
  std::string out;
  // A program that retitles itself (redis, nginx, PostgreSQL's setproctitle)
  // writes its title over the arguments' space and pads the rest with NULs,
  // which read as a run of empty arguments: two or more at the end are that
  // padding, not arguments (one is kept: `sh -c 'cmd' ''` is real).
  size_t len = raw.size();
  size_t nuls = 0;
  while (nuls < len && raw[len - 1 - nuls] == '\0') ++nuls;
  if (nuls >= 3) len -= nuls - 1;  // the title's own terminator stays
  for (size_t at = 0; at < len && out.size() <= kArgvMax;) {
    size_t end = raw.find('\0', at);
    if (end == std::string::npos || end > len) end = len;
    append_arg(&out, raw.data() + at, end - at);
    at = end + 1;
  }
  return cut(out, kArgvMax);
}

Identity read(pid_t pid, uint64_t start_real_ns) {
  Identity id;
  id.pid = pid;
  id.ppid = getppid();
  id.start_real_ns = start_real_ns;
  char buf[PATH_MAX];
  ssize_t n = fsroot::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = 0;
    id.exe = buf;
    const char* base = strrchr(buf, '/');
    id.program = base ? base + 1 : buf;
  }
  id.argv = argv_text(sys::read_file("/proc/self/cmdline"));
  if (id.program.empty()) id.program = "?";
  return id;
}

std::vector<std::string> comments(const Identity& id) {
  return {"profshim: pid " + std::to_string(id.pid) + " (parent " + std::to_string(id.ppid) + ") program " +
              (id.exe.empty() ? "?" : id.exe),
          "profshim: argv " + id.argv, "profshim: started " + iso_utc(id.start_real_ns)};
}

std::string brief(const Identity& id) {
  return "pid " + std::to_string(id.pid) + " (parent " + std::to_string(id.ppid) + "): " + cut(id.argv, 100);
}

}  // namespace identity
