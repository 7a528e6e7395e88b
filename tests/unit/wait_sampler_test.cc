// The wait profile's sampling rule apart from the clock (waits.h): an event
// of d ticks is kept with probability min(1, d/R) and then weighs R/d, so
// the expected delay and contentions are the true ones; and the list of
// timed calls gives each call one name.
#include "check.h"
#include "waits.h"

#include <set>

namespace {
const char* const kNames[] = {
#define NAME(id, name) name,
    WAITS_CALLS(NAME)
#undef NAME
};
}  // namespace

TEST(long_events_are_always_kept_without_a_draw) {
  uint64_t state = 0;
  CHECK(waits::keep(1000, 1000, waits::scale_for(1000), 7, &state));
  CHECK(waits::keep(5000, 1000, waits::scale_for(1000), 7, &state));
  CHECK_EQ(state, uint64_t(0));
  CHECK_EQ(waits::scale_for(1), ~0ull);
}

TEST(short_events_are_kept_in_proportion) {
  const uint64_t rate = 100000, scale = waits::scale_for(rate);
  for (uint64_t d : {1000ull, 25000ull, 90000ull}) {
    uint64_t state = 0, kept = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) kept += waits::keep(d, rate, scale, 12345, &state);
    double want = double(d) / double(rate), got = double(kept) / n;
    CHECK(got > want * 0.95 - 0.002 && got < want * 1.05 + 0.002);
  }
}

TEST(weights_are_unbiased) {
  const uint64_t rate = 100000, scale = waits::scale_for(rate);
  uint64_t state = 0;
  double delay = 0, count = 0, true_delay = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    uint64_t d = 1000 + uint64_t(i % 50) * 4000;  // 1 us .. 197 us, some above R
    true_delay += double(d);
    if (!waits::keep(d, rate, scale, 99, &state)) continue;
    waits::Weight w = waits::weight(d, rate);
    delay += double(w.delay), count += double(w.count) / double(waits::kOne);
  }
  CHECK(delay > true_delay * 0.97 && delay < true_delay * 1.03);
  CHECK(count > n * 0.97 && count < n * 1.03);
  CHECK_EQ(waits::weight(rate, rate).count, waits::kOne);
  CHECK_EQ(waits::weight(3 * rate, rate).delay, 3 * rate);
  CHECK_EQ(waits::weight(rate / 4, rate).count, 4 * waits::kOne);
  CHECK_EQ(waits::weight(rate / 4, rate).delay, rate);
}

TEST(every_call_has_one_name) {
  CHECK_EQ(sizeof kNames / sizeof kNames[0], size_t(waits::kCalls - 1));
  std::set<std::string> seen;
  for (const char* n : kNames) {
    CHECK(*n);
    CHECK(seen.insert(n).second);
  }
  CHECK_EQ(std::string(kNames[waits::kRead - 1]), std::string("read"));
  CHECK_EQ(std::string(kNames[waits::kFcntl - 1]), std::string("fcntl"));
}
