// report_cc: a C++ program for the report to show: CPU in templated code on
// two named threads ("parser" sorts std::vector<std::pair<...>>, "hasher"
// fills a std::unordered_map<std::string, std::vector<long>>), their
// memory held until exit, and the main thread ("report_cc") waiting for
// them on a condition variable. ~1 s of CPU.
// usage: report_cc [ROUNDS]   (default 6)
#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shop {

template <typename Key, typename Value>
struct Ledger {
  std::vector<std::pair<Key, Value>> rows;

  __attribute__((noinline)) void sort_rows() {
    std::sort(rows.begin(), rows.end(), [](const std::pair<Key, Value>& a, const std::pair<Key, Value>& b) {
      return a.first < b.first;
    });
  }
};

template <typename Map>
__attribute__((noinline)) void fill_index(Map* index, int n) {
  for (int i = 0; i < n; ++i) (*index)["key-" + std::to_string(i * 7919 % 100003)].push_back(i);
}

}  // namespace shop

static std::mutex mu;
static std::condition_variable cv;
static int finished;
static shop::Ledger<unsigned long, std::string>* ledger;
static std::unordered_map<std::string, std::vector<long>>* index_map;

static void done() {
  std::lock_guard<std::mutex> lock(mu);
  ++finished;
  cv.notify_all();
}

static void parse(int rounds) {
  pthread_setname_np(pthread_self(), "parser");
  ledger = new shop::Ledger<unsigned long, std::string>();
  unsigned long x = 88172645463325252UL;
  for (int r = 0; r < rounds; ++r) {
    ledger->rows.clear();
    for (int i = 0; i < 200000; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ledger->rows.emplace_back(x, std::string(24, char('a' + i % 26)));
    }
    ledger->sort_rows();
  }
  done();
}

static void hash(int rounds) {
  pthread_setname_np(pthread_self(), "hasher");
  index_map = new std::unordered_map<std::string, std::vector<long>>();
  for (int r = 0; r < rounds; ++r) shop::fill_index(index_map, 150000);
  done();
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 6;
  std::thread a(parse, rounds), b(hash, rounds);
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [] { return finished == 2; });
  }
  a.join();
  b.join();
  printf("report_cc: %zu rows, %zu keys\n", ledger->rows.size(), index_map->size());
  return 0;
}
