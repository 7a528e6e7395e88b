// exp_log_test: the shim's own log() and exp() (shim/exp_log.cc) against
// glibc's libm, loaded with dlopen so that the two can be told apart: this
// binary links the shim's objects, whose definitions win over libm's.
#include <dlfcn.h>
#include <math.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include "check.h"

namespace {

using Fn = double (*)(double);

// Called through volatile pointers, so that no call is folded at compile time
// (the compiler knows what log and exp mean).
Fn volatile g_log = static_cast<Fn>(log);
Fn volatile g_exp = static_cast<Fn>(exp);
Fn volatile g_round = static_cast<Fn>(round);
double our_log(double x) { return g_log(x); }
double our_exp(double x) { return g_exp(x); }
double our_round(double x) { return g_round(x); }

Fn libm(const char* name) {
  static void* h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  return h ? reinterpret_cast<Fn>(dlsym(h, name)) : nullptr;
}

// Distance in units in the last place, on the ordered integer line of doubles.
uint64_t ulps(double a, double b) {
  auto ordered = [](double x) {
    int64_t i;
    std::memcpy(&i, &x, sizeof i);
    return i < 0 ? INT64_MIN - i : i;
  };
  int64_t x = ordered(a), y = ordered(b);
  return x > y ? uint64_t(x) - uint64_t(y) : uint64_t(y) - uint64_t(x);
}

uint64_t g_state = 0x9E3779B97F4A7C15ull;
uint64_t next() {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}

double from_bits(uint64_t b) {
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// The largest error of ours against libm's over xs; prints the worst input.
template <typename Gen>
uint64_t worst(Fn ours, Fn theirs, const char* what, int n, Gen gen) {
  uint64_t max = 0;
  double at = 0;
  for (int i = 0; i < n; ++i) {
    double x = gen();
    uint64_t d = ulps(ours(x), theirs(x));
    if (d > max) max = d, at = x;
  }
  if (max > 0) std::fprintf(stderr, "  %s: %llu ulps at %a\n", what, (unsigned long long)max, at);
  return max;
}

}  // namespace

TEST(ours_are_not_libms) {
  CHECK(libm("log") != nullptr && libm("exp") != nullptr && libm("round") != nullptr);
  CHECK(g_log != libm("log"));
  CHECK(g_exp != libm("exp"));
  CHECK(g_round != libm("round"));
}

TEST(log_within_one_ulp) {
  Fn ours = our_log, theirs = libm("log");
  CHECK(theirs != nullptr);
  if (!theirs) return;
  // Every exponent, subnormals included.
  CHECK(worst(ours, theirs, "log(any positive)", 400000,
              [] { return from_bits(next() & 0x7fefffffffffffffull); }) <= 1);
  // jemalloc's inputs: u in (0, 1], and 1 - 2^-lg_prof_sample.
  CHECK(worst(ours, theirs, "log(u)", 400000,
              [] { return double(next() >> 11) * (1.0 / 9007199254740992.0) + 0x1p-53; }) <= 1);
  int lg = 0;
  CHECK(worst(ours, theirs, "log(1-2^-lg)", 62, [&lg] { return 1.0 - 1.0 / double(uint64_t(1) << ++lg); }) <= 1);
  // Near 1, where the result is small and cancellation would show.
  CHECK(worst(ours, theirs, "log(1+e)", 200000,
              [] { return 1.0 + (double(int64_t(next())) * 0x1p-70); }) <= 1);
}

TEST(log_special_values) {
  CHECK_EQ(our_log(1.0), 0.0);
  CHECK(our_log(0.0) == -std::numeric_limits<double>::infinity());
  CHECK(our_log(-0.0) == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(our_log(-1.0)));
  CHECK(std::isnan(our_log(std::numeric_limits<double>::quiet_NaN())));
  CHECK(our_log(std::numeric_limits<double>::infinity()) == std::numeric_limits<double>::infinity());
  CHECK(ulps(our_log(std::numeric_limits<double>::denorm_min()), libm("log")(std::numeric_limits<double>::denorm_min())) <= 1);
}

TEST(exp_within_one_ulp) {
  Fn ours = our_exp, theirs = libm("exp");
  CHECK(theirs != nullptr);
  if (!theirs) return;
  CHECK(worst(ours, theirs, "exp(-745..709.78)", 400000,
              [] { return -745.1 + double(next() >> 11) * (1454.88 / 9007199254740992.0); }) <= 1);
  // The unbiasing factor's inputs: -size/rate, mostly small.
  CHECK(worst(ours, theirs, "exp(-x), x < 64", 400000,
              [] { return -double(next() >> 11) * (64.0 / 9007199254740992.0); }) <= 1);
  CHECK(worst(ours, theirs, "exp(tiny)", 100000, [] { return double(int64_t(next())) * 0x1p-90; }) <= 1);
  // Subnormal results.
  CHECK(worst(ours, theirs, "exp(-745..-708)", 100000,
              [] { return -745.1 + double(next() >> 11) * (37.0 / 9007199254740992.0); }) <= 1);
}

TEST(exp_special_values) {
  CHECK_EQ(our_exp(0.0), 1.0);
  CHECK(our_exp(710.0) == std::numeric_limits<double>::infinity());
  CHECK(our_exp(std::numeric_limits<double>::infinity()) == std::numeric_limits<double>::infinity());
  CHECK_EQ(our_exp(-746.0), 0.0);
  CHECK_EQ(our_exp(-std::numeric_limits<double>::infinity()), 0.0);
  CHECK(std::isnan(our_exp(std::numeric_limits<double>::quiet_NaN())));
  CHECK(ulps(our_exp(709.78), libm("exp")(709.78)) <= 1);
}

TEST(round_is_libms) {
  Fn theirs = libm("round");
  CHECK(theirs != nullptr);
  if (!theirs) return;
  const double fixed[] = {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, -0.49999999999999994,
                          4503599627370495.5, -4503599627370495.5, 4503599627370496.0, 9007199254740993.0,
                          1e300, -1e-300, std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity()};
  for (double x : fixed) CHECK_EQ(ulps(our_round(x), theirs(x)), 0u);
  CHECK(std::isnan(our_round(std::numeric_limits<double>::quiet_NaN())));
  // Sizes times an unbiasing factor, and values of every magnitude.
  CHECK_EQ(worst(our_round, theirs, "round(x < 2^40)", 200000,
                 [] { return double(next() >> 24) * 0x1p-24 * double(uint64_t(1) << (next() % 40)); }), 0u);
  CHECK_EQ(worst(our_round, theirs, "round(any but NaN)", 200000, [] {
             uint64_t b = next();
             if (((b >> 52) & 0x7ff) == 0x7ff) b &= ~(uint64_t(1) << 62);
             return from_bits(b);
           }),
           0u);
}
