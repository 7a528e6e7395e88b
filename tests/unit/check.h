// A tiny test runner for the unit tests: CHECK records a failure and goes on;
// main() prints "N passed, N failed" for tests/run.py to add up.
#pragma once
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

namespace check {
struct Case { const char* name; std::function<void()> fn; };
inline std::vector<Case>& cases() { static std::vector<Case> v; return v; }
inline int& failures() { static int f = 0; return f; }
struct Register { Register(const char* n, std::function<void()> f) { cases().push_back({n, f}); } };
// This thread's CPU time in seconds: what a "this is fast" check measures.
// A loaded machine stretches the wall clock, not the work; such a check is
// a guard against a slip into quadratic time, with room to spare (speed
// targets are make bench's).
inline double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}
}  // namespace check

#define TEST(name) \
  static void name(); \
  static check::Register reg_##name(#name, name); \
  static void name()

#define CHECK(cond) \
  do { if (!(cond)) { ++check::failures(); \
    std::fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); } } while (0)

#define CHECK_EQ(a, b) \
  do { auto va_ = (a); auto vb_ = (b); if (!(va_ == vb_)) { ++check::failures(); \
    std::fprintf(stderr, "  %s:%d: CHECK_EQ(%s, %s) failed\n", __FILE__, __LINE__, #a, #b); } } while (0)

int main(int argc, char** argv) {
  int passed = 0, failed = 0;
  for (auto& c : check::cases()) {
    if (argc > 1 && std::strcmp(argv[1], c.name) != 0) continue;
    int before = check::failures();
    c.fn();
    bool ok = check::failures() == before;
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", c.name);
    (ok ? passed : failed)++;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
