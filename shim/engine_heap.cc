// engine_heap: the heap profiler's part of a set (engine.h): jemalloc's
// dump of the live and cumulative samples, unsampled (heap_dump.h), each
// stack cut at the allocation call. The same part serves a stop (sampling
// switched off first), a snapshot and a new peak (sampling goes on: the
// dump takes jemalloc's profiler locks for as long as it runs, which is all
// a program's thread can wait on).
#include "engine.h"
#include "go_runtime.h"
#include "heap.h"
#include "heap_dump.h"
#include "sys.h"

namespace engine {
namespace {

// pprof anchors it (^(...)$) and matches each frame's function name.
const char kAllocatorFrames[] =
    "(__libc_)?(malloc|calloc|realloc|reallocarray|valloc|pvalloc|memalign|aligned_alloc|posix_memalign)|"
    "mallocx|rallocx|xallocx|operator new.*|"
    "std::(__new_allocator|allocator|allocator_traits)<.*>::allocate.*|__gnu_cxx::new_allocator<.*>::allocate.*";

bool g_on;  // heap::start() ran for this image

const char* const kAlso[] = {"heap-peak", nullptr};  // snapshot.h's NAME.heap-peak.pprof

}  // namespace

bool heap_sample_of(const uint64_t* pcs, size_t n, const Self& self, Sample* s) {
  size_t i = 0;
  while (i < n && self.in_alloc(pcs[i] - 1)) ++i;  // the allocator
  // Called from the shim's own code (its libstdc++'s static initialisers,
  // say): the shim's allocation, not the program's.
  if (i < n && self.in_text(pcs[i] - 1) && !self.in_wrap(pcs[i] - 1)) return false;
  for (; i < n; ++i)
    if (!self.in_wrap(pcs[i] - 1)) s->addrs.push_back(pcs[i] - 1);
  return true;
}

namespace {

void cut(const heap_dump::Dump& d, const Self& self, Part* out) {
  for (const auto& rec : d.records) {
    Sample s;
    if (!heap_sample_of(rec.pcs.data(), rec.pcs.size(), self, &s)) continue;
    s.values = {int64_t(rec.alloc_objects + 0.5), int64_t(rec.alloc_space + 0.5),
                int64_t(rec.inuse_objects + 0.5), int64_t(rec.inuse_space + 0.5)};
    out->samples.push_back(std::move(s));
  }
}

// Off, jemalloc's profiler is made inactive (it booted with prof:true).
bool start(const config::Config& cfg, std::string* err) {
  if (cfg.heap_sample) return heap::available(err) && heap::start(cfg.heap_lg_sample, err);
  heap::set_active(false);
  return true;
}

bool on() { return g_on; }

void begin(const When&) { g_on = heap::started(); }

void halt() { heap::set_active(false); }

void resume() { heap::set_active(true); }

// Its allocations are the shim's.
void quiet() { heap::set_thread_active(false); }

// A heap profile is a picture of one moment, the dump: its time is when the
// dump was taken and it has no duration, as Go's heap profiles (runtime/pprof
// sets time_nanos when it writes one, and duration_nanos only for CPU).
bool collect(Why why, const When&, const Self& self, Part* out, std::string* err) {
  out->kind = why == Why::kPeak ? "heap-peak" : "heap";
  out->types = {{"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"},
                {"inuse_space", "bytes"}};
  out->default_type = "inuse_space";
  // The allocator's entry points and the C++ allocator layer over them:
  // pprof shows the function that allocated on top, as Go's heap profiles
  // do (the frames stay in the file; pprof -raw and -top hide them alike).
  out->drop_frames = kAllocatorFrames;
  out->period_type = {"space", "bytes"};
  out->time_ns = int64_t(sys::now_ns(CLOCK_REALTIME));
  std::string text, why_not;
  if (!heap::dump(&text, &why_not)) {
    *err = "heap profile not taken: " + why_not;
    return false;
  }
  heap_dump::Dump dump;
  if (!heap_dump::parse(text, &dump, &why_not)) {
    *err = "heap profile unreadable: " + why_not;
    return false;
  }
  out->period = int64_t(dump.period);
  cut(dump, self, out);
  return true;
}

void figures(const Part* part, summary::Figures* f) {
  f->heap_seen = heap::serves_malloc();
  f->go = go_runtime::is_go();
  if (part) f->heap_inuse_bytes = uint64_t(part->total("inuse_space"));
}

}  // namespace

extern const Engine kHeap;  // engine.cc's all()
const Engine kHeap = {
    .name = "heap",
    .also = kAlso,
    .start = start,
    .on = on,
    .begin = begin,
    .halt = halt,
    .resume = resume,
    .quiet_thread = quiet,
    .collect = collect,
    .figures = figures,
};

}  // namespace engine
