// sym_cxx_names: C++ functions to which GCC gives no linkage name (internal
// linkage: statics, a template, a class in an anonymous namespace, a local
// class, lambdas, nested lambdas; parameters of function pointer, typedef'd
// unnamed struct and array reference types), burning CPU inlined and out of
// line. Built -O2 by the Makefile; at -O2 every function
// marked HOT_INLINE is inlined at its calls, and wl::partly also has an
// out-of-line copy (called through a pointer). Built -O0, nothing is inlined
// and every function has a symbol: that build's symbol table is the truth for
// the names (tests/integration/test_symbols.py builds it).
// Each function's body is on the one line marked SYM_CXX_*, so the frames of
// one function are the frames at one line.
// usage: sym_cxx_names [seconds]   default 1.5
// stdout: one line with a checksum.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#ifdef __OPTIMIZE__
#define HOT_INLINE __attribute__((always_inline))
#else
#define HOT_INLINE __attribute__((noinline))
#endif

static volatile unsigned long sink;
static const unsigned long kRounds = 20000;

static double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

namespace wl {

static inline HOT_INLINE unsigned long partly(unsigned long n, long k) {
  unsigned long x = sink; for (unsigned long i = 0; i < n; i++) { x = x * 2862933555777941757UL + k; sink = x; } return x;  // SYM_CXX_PARTLY
}

static inline HOT_INLINE unsigned long only_inlined(const std::string& tag, unsigned long n) {
  unsigned long x = tag.size(); for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + 7; sink = x; } return x;  // SYM_CXX_ONLY
}

template <class T> static inline HOT_INLINE T scaled(T v, unsigned long n) {
  T x = v; for (unsigned long i = 0; i < n; i++) { x = x * 3 + 1; sink = x; } return x;  // SYM_CXX_TEMPLATE
}

typedef struct { int a; long b; } pair_t;

static inline HOT_INLINE unsigned long shapes(unsigned long (*f)(int), const pair_t* p, int (&arr)[4], unsigned long n) {
  unsigned long x = p->b + arr[0] + (f == nullptr); for (unsigned long i = 0; i < n; i++) { x = x * 31 + 7; sink = x; } return x;  // SYM_CXX_SHAPES
}

namespace {
struct Acc {
  unsigned long seed;
  HOT_INLINE unsigned long spin(unsigned long n) const {
    unsigned long x = seed; for (unsigned long i = 0; i < n; i++) { x = x * 3935559000370003845UL + 11; sink = x; } return x;  // SYM_CXX_METHOD
  }
};
}  // namespace

}  // namespace wl

__attribute__((noinline)) unsigned long direct_partly(unsigned long n) { return wl::partly(n, 5); }

__attribute__((noinline)) unsigned long via_pointer(unsigned long (*volatile f)(unsigned long, long), unsigned long n) {
  return f(n, 3);
}

__attribute__((noinline)) unsigned long lambdas(unsigned long n) {
  auto first = [](int k, unsigned long m) HOT_INLINE {
    unsigned long x = sink; for (unsigned long i = 0; i < m; i++) { x = x * 1442695040888963407UL + k; sink = x; } return x;  // SYM_CXX_LAMBDA1
  };
  auto by_double = [](double k, unsigned long m) HOT_INLINE {
    unsigned long x = sink; for (unsigned long i = 0; i < m; i++) { x = x * 2862933555777941757UL + (unsigned long)k; sink = x ^ 1; } return x;  // SYM_CXX_LAMBDA2
  };
  auto second = [](int k, unsigned long m) HOT_INLINE {
    unsigned long x = sink; for (unsigned long i = 0; i < m; i++) { x = x * 6364136223846793005UL + k; sink = x ^ 2; } return x;  // SYM_CXX_LAMBDA3
  };
  return first(1, n) + by_double(2.0, n) + second(3, n);
}

__attribute__((noinline)) unsigned long local_class(unsigned long n) {
  struct Local {
    static HOT_INLINE unsigned long go(unsigned long m) {
      unsigned long x = 1; for (unsigned long i = 0; i < m; i++) { x = x * 5 + i; sink = x; } return x;  // SYM_CXX_LOCAL
    }
  };
  return Local::go(n);
}

__attribute__((noinline)) unsigned long nested_lambdas(unsigned long n) {
  auto outer = [n](int k) HOT_INLINE {
    auto inner = [k](unsigned long m) HOT_INLINE {
      unsigned long x = k; for (unsigned long i = 0; i < m; i++) { x = x * 9 + i; sink = x; } return x;  // SYM_CXX_NESTED
    };
    return inner(n);
  };
  return outer(2);
}

static unsigned long identity(int v) { return v; }

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 1.5;
  const std::string tag = "sym_cxx_names";
  wl::Acc acc{sink};
  wl::pair_t pair{1, 2};
  int arr[4] = {1, 2, 3, 4};
  double t0 = cpu_seconds();
  unsigned long sum = 0;
  while (cpu_seconds() - t0 < seconds) {
    sum += direct_partly(kRounds);
    sum += via_pointer(wl::partly, kRounds);
    sum += wl::only_inlined(tag, kRounds);
    sum += acc.spin(kRounds);
    sum += lambdas(kRounds);
    sum += wl::scaled<unsigned long>(sum, kRounds);
    sum += wl::shapes(identity, &pair, arr, kRounds);
    sum += local_class(kRounds);
    sum += nested_lambdas(kRounds);
  }
  std::printf("sym_cxx_names: checksum=%016lx\n", sum);
  return 0;
}
