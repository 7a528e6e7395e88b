// memlog: NAME.mem.tsv rows; see memlog.h.
#include "memlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <malloc.h>

#include "alloc_choice.h"
#include "fsroot.h"
#include "glibc_compat.h"
#include "image.h"
#include "jemalloc_raw.h"
#include "sys.h"

namespace memlog {
namespace {

const char kHeader[] =
    "time\tseconds\tevent\trss_bytes\theap_allocated_bytes\tallocator_mapped_bytes\theap_peak_bytes\n";

uint64_t g_start_mono_ns;
bool g_used;  // this image has written a row

// Resident set from /proc/self/statm (its second field, in pages).
uint64_t rss_bytes() {
  std::string statm = sys::read_file("/proc/self/statm");
  unsigned long long size = 0, resident = 0;
  if (sscanf(statm.c_str(), "%llu %llu", &size, &resident) != 2) return 0;
  return uint64_t(resident) * uint64_t(sysconf(_SC_PAGESIZE));
}

// The allocator's own view, as of now: the shim's jemalloc (a new
// statistics epoch) or whichever serves in its place: the program's own
// libjemalloc through its mallctl, tcmalloc through MallocExtension, else
// glibc's mallinfo2, where blocks mapped on their own count apart (hblkhd).
void allocator_figures(uint64_t* allocated, uint64_t* mapped) {
  if (alloc_choice::jemalloc()) {
    jemalloc_raw::refresh();
    *allocated = jemalloc_raw::stat("stats.allocated");
    *mapped = jemalloc_raw::stat("stats.mapped");
    return;
  }
  if (auto ctl = alloc_choice::optional().mallctl) {
    uint64_t epoch = 1;
    size_t esz = sizeof epoch, a = 0, m = 0, sz = sizeof a;
    ctl("epoch", &epoch, &esz, &epoch, esz);
    ctl("stats.allocated", &a, &sz, nullptr, 0);
    ctl("stats.mapped", &m, &sz, nullptr, 0);
    *allocated = a, *mapped = m;
    return;
  }
  if (auto prop = alloc_choice::optional().tc_property) {
    size_t a = 0, heap = 0;
    prop("generic.current_allocated_bytes", &a);
    prop("generic.heap_size", &heap);
    *allocated = a, *mapped = heap;
    return;
  }
  struct mallinfo2 mi = mallinfo2();
  *allocated = mi.uordblks + mi.hblkhd;
  *mapped = mi.arena + mi.hblkhd;
}

}  // namespace

void begin(uint64_t start_mono_ns) {
  g_start_mono_ns = start_mono_ns;
  g_used = false;
}

bool used() { return g_used; }

std::string append(const std::string& dir, const std::string& stem, const Row& row) {
  std::string path = dir + "/" + stem + ".mem.tsv";
  uint64_t allocated = 0, mapped = 0;
  allocator_figures(&allocated, &mapped);
  uint64_t now_real = sys::now_ns(CLOCK_REALTIME), now_mono = sys::now_ns(CLOCK_MONOTONIC);
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  bool fresh = !g_used && !image::written_this_session(path);
  int fd = fsroot::open(path.c_str(), flags | (fresh ? O_TRUNC : 0), 0644);
  if (fd < 0) return "cannot write " + path + ": " + strerror(errno);
  std::string text;
  off_t end = lseek(fd, 0, SEEK_END);
  if (end == 0) text = kHeader;
  char line[256];
  snprintf(line, sizeof line, "%llu.%03llu\t%.3f\t%s\t%llu\t%llu\t%llu\t%llu\n",
           (unsigned long long)(now_real / 1000000000ull), (unsigned long long)(now_real / 1000000ull % 1000),
           double(now_mono - g_start_mono_ns) / 1e9, row.event, (unsigned long long)rss_bytes(),
           (unsigned long long)allocated, (unsigned long long)mapped, (unsigned long long)row.heap_peak);
  text += line;
  bool ok = sys::write_all(fd, text.data(), text.size());
  int err = errno;
  close(fd);
  if (!ok) return "cannot write " + path + ": " + strerror(err);
  g_used = true;
  return "";
}

}  // namespace memlog
