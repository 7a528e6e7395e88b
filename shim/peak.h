// peak: noticing, on the program's allocation path, that the heap may have
// passed its high-water mark, for NAME.heap-peak.pprof (the snapshot worker
// writes it, snapshot.h).
//
// The rule (docs/DESIGN.md, "The heap's high-water mark"):
//  - a peak file is written when the live heap (the heap profile's in-use
//    estimate) exceeds the last one written by kGrowth (10%, tcmalloc's
//    factor), and the first once it exceeds PROFILE_PEAK_FLOOR (64 MiB);
//  - never before the image has run PROFILE_PEAK_AFTER (10 s): the
//    short-lived images of a build or a test run never pay for one;
//  - rate-limited by the worker (snapshot.cc): dumps, and writes.
//
// The allocation path only notices: jemalloc calls our backtrace hook for
// each sampled allocation (one in PROFILE_HEAP_SAMPLE bytes, on average),
// where, after jemalloc's own unwind, one relaxed load of jemalloc's count
// of pages it holds from the system (the counter its prof_gdump compares
// with its high-water mark) is compared with the threshold. Those pages are
// at least the live heap, so the heap cannot pass the threshold unnoticed;
// they may also be freed memory not yet returned (jemalloc's decay), so the
// worker's dump decides, and a check that found no new peak holds the next
// one back (the pages grow by kGrowth again, or a backoff of 1 s doubling
// up to 16 s passes). Above the threshold the hook also reads the clock.
//
// Signal context: none. The hook runs inside jemalloc (reentrancy guarded
// by jemalloc: allocations it makes are not sampled).
#pragma once
#include <stdint.h>

namespace peak {

constexpr double kGrowth = 1.1;

// At setup, with the heap profiled: installs the hook on jemalloc's unwind
// (which also carries a stack of C called from Go on into Go:
// go_stacks.h); with floor_bytes 0 no peak is looked for. False with *err
// if jemalloc refuses it. wake: what the hook calls when a check
// is due (snapshot.cc, which may start the worker); false if nobody will
// look (then a later sampled allocation asks again).
bool setup(uint64_t floor_bytes, uint64_t after_ms, bool (*wake)(), const char** err);
bool on();
// An image begins (setup, a fork child): nothing written yet, the age
// counts from now.
void begin(uint64_t start_mono_ns);

// The worker's side. A check was asked: the hook asks no more until the
// worker settles it with no_peak() or written().
bool asked();
// In use above which a dump is a new peak: the floor, or the last written
// peak's in-use by kGrowth.
uint64_t threshold();
// A dump found no new peak: the next check waits for more pages or time.
void no_peak();
// A peak file with this much in use was written. The check stays asked
// when the allocator already holds more than the next threshold.
void written(uint64_t inuse_bytes);
uint64_t last_written();

}  // namespace peak
