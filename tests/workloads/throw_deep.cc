// throw_deep: a single-threaded program that spends its time in C++
// exceptions: each round throws from 12 frames down, each frame holding
// std::strings that the unwinder destroys on the way (landing pads, then
// _Unwind_Resume), so most CPU samples land inside libgcc's unwinder.
// usage: throw_deep [seconds]   default 1
// stdout: one line with the rounds' checksum (the same in every run).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <stdexcept>
#include <string>

static double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

struct Deep : std::runtime_error {
  explicit Deep(const std::string& what) : std::runtime_error(what) {}
};

// Strings long enough to live on the heap: each frame's destructors run
// during the unwind.
__attribute__((noinline)) unsigned long descend(int depth, unsigned long seed) {
  std::string a(40 + depth, char('a' + depth % 26));
  std::string b = a + std::to_string(seed);
  if (depth == 12) throw Deep(b);
  unsigned long r = descend(depth + 1, seed * 31 + a.size());
  return r + b.size();  // never reached: keeps a and b alive across the call
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  double start = cpu_seconds();
  unsigned long rounds = 0, sum = 0;
  // A fixed number of rounds per check of the clock, so the checksum only
  // depends on how many checks passed: printed per block, it is the same
  // in every run.
  const unsigned long kBlock = 1000;
  while (cpu_seconds() - start < seconds) {
    for (unsigned long i = 0; i < kBlock; ++i, ++rounds) {
      try {
        descend(1, i);
      } catch (const Deep& e) {
        sum += e.what()[0];
      }
    }
  }
  printf("throw_deep: %lu per block, checksum %lu\n", kBlock, sum / (rounds / kBlock));
  return 0;
}
