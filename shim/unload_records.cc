// unload_records: the list of unload.h's records, which the symbolizer
// reads at the stop. Apart from unload.cc, whose dlclose work needs the
// engines, the allocator and recover: the unit tests link the symbolizer,
// and with it this file alone.
#include <atomic>

#include "unload.h"

namespace unload {
namespace {

// More records than this (a plugin reloaded at ever new addresses) are not
// kept: each holds a few mappings and the frames of its sampled addresses.
constexpr int kMaxRecords = 1024;

std::atomic<const Record*> g_head{nullptr};
std::atomic<int> g_records{0};

}  // namespace

bool publish(Record* r) {
  if (g_records.fetch_add(1) >= kMaxRecords) return false;
  const Record* head = g_head.load(std::memory_order_acquire);
  do {
    r->next = head;
  } while (!g_head.compare_exchange_weak(head, r, std::memory_order_release, std::memory_order_acquire));
  return true;
}

const Record* records() { return g_head.load(std::memory_order_acquire); }

}  // namespace unload
