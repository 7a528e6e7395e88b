// heap_top: 200 MiB held by fill_cache, which allocates with new[]; 40 MiB
// by fill_vector, through std::vector's allocator; 8 MiB by keep_copy,
// through strdup. Prints "ready" and exits 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static std::vector<char*> cache;
static std::vector<std::vector<long>*> vectors;
static char* copy;

__attribute__((noinline)) void fill_cache() {
  for (int i = 0; i < 200; ++i) {
    char* block = new char[1 << 20];
    memset(block, i, 1 << 20);
    cache.push_back(block);
  }
}

__attribute__((noinline)) void fill_vector() {
  for (int i = 0; i < 40; ++i) {
    auto* v = new std::vector<long>();
    v->resize((1 << 20) / sizeof(long), i);
    vectors.push_back(v);
  }
}

__attribute__((noinline)) void keep_copy() {
  static char text[8 << 20];
  memset(text, 'x', sizeof text - 1);
  copy = strdup(text);
}

int main() {
  fill_cache();
  fill_vector();
  keep_copy();
  printf("ready %zu %zu %d\n", cache.size(), vectors.size(), copy != nullptr);
  return 0;
}
