/* dlopen_arg LIB: loads LIB, then waits up to 10 s and exits 3 -- which a
 * library that ends the process in its constructor never lets it do. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  if (!dlopen(argv[1], RTLD_NOW)) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  for (int i = 0; i < 1000; ++i) usleep(10000);
  return 3;
}
