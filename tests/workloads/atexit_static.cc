// atexit_static: C++ variant of atexit_free. A static object's destructor
// frees a 48 MiB buffer that wl::hold_for_static_dtor allocated with new[];
// the heap profile, taken before static destructors run, must still show it.
// usage: atexit_static [return|exit]
// stdout: "truth wl::hold_for_static_dtor inuse_space=N", then, from the
// destructor, "destructor: freed".
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace wl {

const unsigned long kHeld = 48UL << 20;

struct Holder {
  char* p = nullptr;
  ~Holder() {
    delete[] p;
    p = nullptr;
    std::printf("destructor: freed\n");
    std::fflush(stdout);
  }
};

static Holder holder;

__attribute__((noinline, noclone)) void hold_for_static_dtor(unsigned long n) {
  holder.p = new char[n];
  std::memset(holder.p, 0x42, n);
}

}  // namespace wl

int main(int argc, char** argv) {
  bool via_exit = argc > 1 && std::strcmp(argv[1], "exit") == 0;
  wl::hold_for_static_dtor(wl::kHeld);
  std::printf("truth wl::hold_for_static_dtor inuse_space=%lu\n", wl::kHeld);
  std::fflush(stdout);
  if (via_exit) std::exit(0);
  return 0;
}
