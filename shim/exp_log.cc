// exp_log: the shim's own log(), exp() and round(), so that it needs no libm.
// jemalloc calls log() for every thread's first heap-sample interval (prof.c;
// opt.prof is on even when the shim is inert), exp() and round() to unbias
// its sizes and dump (prof_data.c); heap_dump.cc scales with exp(). Those
// references bind to these definitions when the shim is linked (the version
// script keeps them local), and an inert process maps nothing but the shim,
// libc and the loader (docs/DESIGN.md).
//
// log and exp: fdlibm's reductions (e_log.c, e_exp.c) with Taylor
// coefficients carried to double precision, within 1 ulp of glibc's over the
// double range (tests/unit/exp_log_test.cc). Accuracy matters for the
// sampling interval and the unbiasing factor, not speed: both run once per
// sample at most.
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 0x3fe62e42fee00000
constexpr double kLn2Lo = 1.90821492927058770002e-10;  // ln2 - kLn2Hi
constexpr double kInvLn2 = 1.44269504088896338700e+00;
constexpr double kSqrt2 = 1.41421356237309514547e+00;

uint64_t bits_of(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

double from_bits(uint64_t b) {
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// 2^k for a normal result, -1022 <= k <= 1023.
double pow2(int k) { return from_bits(uint64_t(k + 1023) << 52); }

}  // namespace

extern "C" double log(double x) {
  if (x != x) return x;
  if (x < 0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0) return -std::numeric_limits<double>::infinity();
  if (x == std::numeric_limits<double>::infinity()) return x;
  int k = 0;
  uint64_t b = bits_of(x);
  if ((b >> 52) == 0) {  // subnormal: make it normal first
    x *= 18014398509481984.0;  // 2^54
    k = -54;
    b = bits_of(x);
  }
  k += int(b >> 52) - 1023;
  double m = from_bits((b & ((uint64_t(1) << 52) - 1)) | (uint64_t(1023) << 52));  // [1, 2)
  if (m > kSqrt2) {
    m *= 0.5;
    k += 1;
  }
  // log(1+f) = f - hfsq + s*(hfsq+R), s = f/(2+f), R = 2s^2/3 + 2s^4/5 + ...
  // (the series of 2*atanh(s)); |s| <= 0.1716, so s^2 <= 0.0295 and the
  // twelfth term is below 2^-60 of the result.
  double f = m - 1.0;
  double s = f / (2.0 + f);
  double z = s * s;
  double r = 0;
  for (int n = 25; n >= 3; n -= 2) r = z * (2.0 / n + r);
  double hfsq = 0.5 * f * f;
  double dk = k;
  return dk * kLn2Hi - ((hfsq - (s * (hfsq + r) + dk * kLn2Lo)) - f);
}

extern "C" double exp(double x) {
  if (x != x) return x;
  if (x > 709.782712893383973096) return std::numeric_limits<double>::infinity();
  if (x < -745.13321910194110842) return 0.0;
  // x = k*ln2 + r, |r| <= ln2/2, r carried as hi - lo;
  // exp(r) = 1 + r + r^2*q/2, q = 1 + (r/3)(1 + (r/4)(1 + ...)) to r^17/17!
  // (below 2^-70 at |r| = 0.35).
  double kd = x * kInvLn2;
  int k = int(kd < 0 ? kd - 0.5 : kd + 0.5);
  double hi = x - k * kLn2Hi;
  double lo = k * kLn2Lo;
  double r = hi - lo;
  double q = 1.0;
  for (int n = 17; n >= 3; --n) q = 1.0 + r * q / n;
  double er = 1.0 + (hi - (lo - r * r * (0.5 * q)));
  if (k > 1023) return er * 2.0 * pow2(k - 1);
  if (k < -1022) return er * pow2(k + 1000) * pow2(-1000);
  return er * pow2(k);
}

// Halfway cases away from zero, as C's round(); exact (|x| < 2^52 converts to
// an integer and back without loss, and x - t is exact there).
extern "C" double round(double x) {
  if (!(x > -4503599627370496.0 && x < 4503599627370496.0)) return x;  // NaN, inf, integral
  double t = double(int64_t(x));
  double d = x - t;
  if (d >= 0.5) t += 1.0;
  if (d <= -0.5) t -= 1.0;
  return __builtin_copysign(t, x);
}
