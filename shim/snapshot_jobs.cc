// snapshot_jobs: the snapshot worker's jobs; see snapshot_jobs.h.
#include "snapshot_jobs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "errline.h"
#include "finish.h"
#include "fsroot.h"
#include "image.h"
#include "memlog.h"
#include "peak.h"
#include "sys.h"

namespace snapshot_jobs {
namespace {

constexpr uint64_t kMs = 1000000ull;
constexpr uint64_t kMinDumpGapNs = 100 * kMs, kMinWriteGapNs = 1000 * kMs;

// Touched only by the worker, and by settle() once the worker is halted.
struct Jobs {
  const config::Config* cfg = nullptr;
  uint64_t start_real_ns = 0;    // the image's start (its identity's comments)
  finish::NameCache* names = nullptr;  // names of its earlier sets (finish.h)
  std::string stem;              // the image's stem as it runs ("" until the first job)
  bool numbered_known = false;   // the sets of this session under stem looked up
  uint64_t next_seq = 1;
  std::vector<uint64_t> kept;    // numbers of the sets on disk, oldest first
  uint64_t snapshots = 0, first_seq = 0, last_seq = 0;
  uint64_t peaks = 0;
  std::string peak_path;         // the heap-peak file this image wrote
  finish::Set* pending = nullptr;  // the largest peak dump not yet written
  uint64_t pending_inuse = 0;
  uint64_t dump_ok_ns = 0, write_ok_ns = 0;
  int64_t trigger_seen_ns = 0;   // the trigger file's time when last consumed
};
Jobs* g;  // a new one per image (a fork child leaves the parent's as it was)

const std::string& stem() {
  if (g->stem.empty()) g->stem = image::unique_stem(g->cfg->dir, image::stem());
  return g->stem;
}

std::string path_of(const std::string& name) { return g->cfg->dir + "/" + name; }

// "<stem>.<seq>.<kind>.pprof" -> seq; 0 if name is not one of stem's sets.
uint64_t seq_of(const std::string& name, const std::string& stem) {
  if (name.compare(0, stem.size() + 1, stem + ".") != 0) return 0;
  const char* p = name.c_str() + stem.size() + 1;
  char* end = nullptr;
  if (*p < '1' || *p > '9') return 0;
  unsigned long long seq = strtoull(p, &end, 10);
  if (*end != '.') return 0;
  const char* kind = end + 1;
  size_t n = strlen(kind);
  if (n <= 6 || strcmp(kind + n - 6, ".pprof") != 0) return 0;
  for (const char* c = kind; c < kind + n - 6; ++c)
    if (!((*c >= 'a' && *c <= 'z') || *c == '-')) return 0;
  return seq;
}

// The numbered sets already there: this session's (an image before an exec
// of this process) are continued; an earlier run's are removed, as a run
// replaces its NAME.* files.
void look_up_numbered() {
  g->numbered_known = true;
  DIR* d = fsroot::opendir(g->cfg->dir.c_str());
  if (!d) return;
  std::vector<uint64_t> ours;
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    uint64_t seq = seq_of(name, stem());
    if (!seq) continue;
    if (image::written_this_session(path_of(name)))
      ours.push_back(seq);
    else
      fsroot::unlink(path_of(name).c_str());
  }
  closedir(d);
  std::sort(ours.begin(), ours.end());
  ours.erase(std::unique(ours.begin(), ours.end()), ours.end());
  g->kept = ours;
  if (!ours.empty()) g->next_seq = ours.back() + 1;
}

void remove_set(uint64_t seq) {
  int n = 0;
  const engine::Engine* const* all = engine::all(&n);
  std::string base = stem() + "." + std::to_string(seq) + ".";
  for (int i = 0; i < n; ++i) fsroot::unlink(path_of(base + all[i]->name + ".pprof").c_str());
}

void say(const std::string& what, const std::vector<std::string>& errors) {
  std::string line = "error: " + what + ":";
  for (size_t i = 0; i < errors.size(); ++i) line += (i ? "; " : " ") + errors[i];
  errline::line(line.c_str());
}

std::string mib(uint64_t bytes) {
  char b[32];
  snprintf(b, sizeof b, "%.1f MiB", double(bytes) / 1048576.0);
  return b;
}

finish::Target target(const std::string& infix, const std::string& why) {
  finish::Target t;
  t.dir = g->cfg->dir, t.stem = stem(), t.infix = infix, t.why = why;
  t.start_real_ns = g->start_real_ns;
  t.names = g->names;
  return t;
}

engine::When now_when() {
  engine::When w;
  w.mono_ns = sys::now_ns(CLOCK_MONOTONIC);
  w.real_ns = sys::now_ns(CLOCK_REALTIME);
  return w;
}

void write_peak() {
  uint64_t t0 = sys::now_ns(CLOCK_MONOTONIC);
  finish::Written w;
  finish::write(*g->pending, target("", "heap peak, " + mib(g->pending_inuse) + " in use"), &w);
  const std::vector<std::string>& files = w.files;
  uint64_t took = sys::now_ns(CLOCK_MONOTONIC) - t0;
  g->write_ok_ns = t0 + std::max(kMinWriteGapNs, 5 * took);
  if (!g->pending->errors.empty()) say("heap peak not written", g->pending->errors);
  if (!files.empty()) {
    ++g->peaks;
    g->peak_path = files[0];
    peak::written(g->pending_inuse);
    mem_row("peak");
  } else {
    peak::no_peak();
  }
  delete g->pending;
  g->pending = nullptr;
  g->pending_inuse = 0;
}

}  // namespace

void begin(const config::Config* cfg, uint64_t start_real_ns) {
  g = new Jobs();
  g->cfg = cfg;
  g->start_real_ns = start_real_ns;
  g->names = finish::new_name_cache();
}

void numbered(const char* trigger) {
  if (!g->numbered_known) look_up_numbered();
  uint64_t seq = g->next_seq++;
  finish::Set set;
  finish::collect(engine::Why::kSnapshot, now_when(), &set);
  char comment[96];
  snprintf(comment, sizeof comment, "snapshot %llu (%s)", (unsigned long long)seq, trigger);
  finish::Written w;
  finish::write(set, target("." + std::to_string(seq), comment), &w);
  if (!set.errors.empty()) say(std::string(comment) + " incomplete", set.errors);
  if (w.files.empty()) return;
  if (!g->snapshots++) g->first_seq = seq;
  g->last_seq = seq;
  g->kept.push_back(seq);
  while (g->kept.size() > g->cfg->snapshot_keep) {
    remove_set(g->kept.front());
    g->kept.erase(g->kept.begin());
  }
  char event[48];
  snprintf(event, sizeof event, "snapshot %llu", (unsigned long long)seq);
  mem_row(event);
}

uint64_t peak(uint64_t now) {
  if (!peak::asked()) return 0;
  if (now >= g->dump_ok_ns) {
    finish::Set* set = new finish::Set();
    finish::collect(engine::Why::kPeak, now_when(), set);
    uint64_t took = sys::now_ns(CLOCK_MONOTONIC) - now;
    g->dump_ok_ns = now + std::max(kMinDumpGapNs, 10 * took);
    const engine::Part* heap = set->part("heap-peak");
    uint64_t inuse = heap ? uint64_t(heap->total("inuse_space")) : 0;
    if (heap && inuse > peak::threshold() && inuse > g->pending_inuse) {
      delete g->pending;
      g->pending = set, g->pending_inuse = inuse;
    } else {
      if (!heap && !set->errors.empty()) say("heap peak not taken", set->errors);
      delete set;
      if (!g->pending) {
        peak::no_peak();
        return 0;
      }
    }
  }
  now = sys::now_ns(CLOCK_MONOTONIC);
  if (g->pending && now >= g->write_ok_ns) {
    write_peak();
    return 0;
  }
  // Until the file is due, a larger dump replaces the one pending.
  return std::min(g->write_ok_ns, g->dump_ok_ns);
}

void mem_row(const char* event) {
  memlog::Row row;
  row.event = event;
  row.heap_peak = peak::last_written();
  std::string err = memlog::append(g->cfg->dir, stem(), row);
  if (!err.empty()) errline::line(("error: " + err).c_str());
}

bool trigger_touched(uint64_t image_start_real_s) {
  std::string path = path_of(stem() + ".snapshot");
  struct stat st;
  if (fsroot::lstat(path.c_str(), &st) != 0) return false;
  int64_t t = int64_t(st.st_mtim.tv_sec) * 1000000000ll + st.st_mtim.tv_nsec;
  // Left by an earlier run: not a request to this one.
  if (st.st_mtim.tv_sec + 1 < (long long)image_start_real_s || t == g->trigger_seen_ns) return false;
  g->trigger_seen_ns = t;
  fsroot::unlink(path.c_str());  // consumed: the next touch asks again
  return true;
}

void settle(const engine::Part* final_heap, summary::Figures* f) {
  if (!g) return;
  if (g->peaks) {
    uint64_t final_inuse = final_heap ? uint64_t(final_heap->total("inuse_space")) : 0;
    if (double(peak::last_written()) > double(final_inuse) * peak::kGrowth)
      f->files.push_back(g->peak_path);
    else
      fsroot::unlink(g->peak_path.c_str());
  } else if (peak::on()) {
    // An earlier run's, which this one did not replace.
    std::string old = path_of(image::stem() + ".heap-peak.pprof");
    if (!image::written_this_session(old)) fsroot::unlink(old.c_str());
  }
  if (memlog::used()) {
    mem_row("stop");
    f->files.push_back(path_of(stem() + ".mem.tsv"));
  }
  f->peaks = g->peaks;
  f->snapshots = g->snapshots;
  f->snapshots_kept = g->kept.size();
  if (g->snapshots) {
    f->first_snapshot = path_of(stem() + "." + std::to_string(g->first_seq) + ".*");
    f->last_snapshot = path_of(stem() + "." + std::to_string(g->last_seq) + ".*");
  }
}

}  // namespace snapshot_jobs
