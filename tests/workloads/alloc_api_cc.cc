// alloc_api_cc: every C++ allocation entry point (new/delete, new[]/delete[],
// aligned new/delete, sized delete, nothrow new, bad_alloc), each checked and
// freed with the matching function; then one 8 MiB block held through each
// form at its own named site (wl::hold_*), freed by a static destructor after
// the profile is taken.
// stdout: "ok ..." lines, one "truth" line per held site, "alloc_api_cc: all ok".
// Any broken contract prints "FAIL ..." and exits 1.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace wl {

const std::size_t kHeld = 8UL << 20;
int failures;

void expect(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) failures++;
}

bool aligned(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

struct alignas(256) Aligned256 { char bytes[1000]; };
struct Big { char bytes[kHeld]; };
struct alignas(4096) BigAligned { char bytes[kHeld]; };

void check_contracts() {
  int* one = new int(5);
  expect(*one == 5, "new/delete");
  delete one;

  int* many = new int[1000]();
  expect(many[999] == 0, "new[]/delete[] (value-initialized)");
  delete[] many;

  Aligned256* a = new Aligned256;
  expect(aligned(a, 256), "aligned new / aligned delete");
  delete a;

  Aligned256* as = new Aligned256[10];
  expect(aligned(as, 256), "aligned new[] / aligned delete[]");
  delete[] as;

  void* s = ::operator new(1000);
  std::memset(s, 1, 1000);
  ::operator delete(s, 1000);
  expect(true, "operator new + sized operator delete");

  void* sa = ::operator new(5000, std::align_val_t(4096));
  expect(aligned(sa, 4096), "operator new(align_val_t) + sized aligned delete");
  ::operator delete(sa, 5000, std::align_val_t(4096));

  char* nt = new (std::nothrow) char[100];
  expect(nt != nullptr, "nothrow new[]");
  delete[] nt;

  void* huge = ::operator new(SIZE_MAX / 2, std::nothrow);
  expect(huge == nullptr, "nothrow new of a huge size returns nullptr");

  bool threw = false;
  try {
    void* h = ::operator new(SIZE_MAX / 2);
    // Seen to escape: GCC 10 removes an unused new/delete pair (and so the
    // throw) at -O2.
    asm volatile("" : : "r"(h) : "memory");
    ::operator delete(h);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  expect(threw, "new of a huge size throws std::bad_alloc");

  std::vector<std::string> v;
  for (int i = 0; i < 10000; i++) v.push_back(std::string(100, 'x') + std::to_string(i));
  expect(v.back() == std::string(100, 'x') + "9999", "std::vector<std::string> growth");
}

struct Held {
  char* array = nullptr;
  Big* scalar = nullptr;
  BigAligned* aligned_scalar = nullptr;
  char* nothrow_array = nullptr;
  void* raw_aligned = nullptr;
  ~Held() {
    delete[] array;
    delete scalar;
    delete aligned_scalar;
    delete[] nothrow_array;
    ::operator delete(raw_aligned, kHeld, std::align_val_t(65536));
  }
};
static Held held;

void truth(const char* site) { std::printf("truth %s inuse_space=%zu\n", site, kHeld); }

__attribute__((noinline, noclone)) void hold_new_array() {
  held.array = new char[kHeld];
  std::memset(held.array, 1, kHeld);
  truth("wl::hold_new_array");
}
__attribute__((noinline, noclone)) void hold_new_scalar() {
  held.scalar = new Big;
  std::memset(held.scalar, 2, kHeld);
  truth("wl::hold_new_scalar");
}
__attribute__((noinline, noclone)) void hold_aligned_new() {
  held.aligned_scalar = new BigAligned;
  std::memset(held.aligned_scalar, 3, kHeld);
  truth("wl::hold_aligned_new");
}
__attribute__((noinline, noclone)) void hold_nothrow_new() {
  held.nothrow_array = new (std::nothrow) char[kHeld];
  std::memset(held.nothrow_array, 4, kHeld);
  truth("wl::hold_nothrow_new");
}
__attribute__((noinline, noclone)) void hold_operator_new_aligned() {
  held.raw_aligned = ::operator new(kHeld, std::align_val_t(65536));
  std::memset(held.raw_aligned, 5, kHeld);
  truth("wl::hold_operator_new_aligned");
}

}  // namespace wl

int main() {
  wl::check_contracts();
  wl::hold_new_array();
  wl::hold_new_scalar();
  wl::hold_aligned_new();
  wl::hold_nothrow_new();
  wl::hold_operator_new_aligned();
  if (wl::failures) {
    std::printf("alloc_api_cc: %d FAILED\n", wl::failures);
    return 1;
  }
  std::printf("alloc_api_cc: all ok\n");
  return 0;
}
