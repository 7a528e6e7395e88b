// forks_area: the layout of the hand-over area (forks.h), a file mapped
// MAP_SHARED by an image and every fork descendant of it. One 4 KiB header,
// then the slot index (slot_max slots, one per child that hands over, taken
// with one atomic add on `nslots`), then blobs, each at a place the child
// reserved with one atomic add on `used`; a blob is its header then its
// records, each record a stack with its values. The header and the index
// are written to the file before it is mapped and a child writes its blob
// with pwrite: no store to the mapping lands on a page the file system
// has not given (a full disk is an error there, not SIGBUS). `profshim ls` reads the
// header of a file a SIGKILLed owner left behind (cli/ls.py): keep the
// offsets of its first fields. Pure layout.
#pragma once
#include <stdint.h>

namespace forks {
namespace area {

constexpr uint64_t kMagic = 0x4c4f4f5053485350ull;  // "PSHSPOOL", little-endian
constexpr uint32_t kVersion = 2;
constexpr uint64_t kHeaderBytes = 4096;

enum State : uint32_t { kUnset = 0, kOpen = 1, kClosed = 2 };

// Every field at a fixed offset (cli/ls.py reads them): the counters are
// updated with __atomic builtins by whichever process hands over.
struct Header {
  uint64_t magic;          // 0
  uint32_t version;        // 8
  int32_t owner_pid;       // 12
  uint32_t state;          // 16: kOpen until the owner's stop
  uint32_t writers;        // 20: children mid hand-over
  uint64_t used;           // 24: bytes reserved after the header (may pass capacity)
  uint64_t capacity;       // 32: bytes after the header
  uint64_t merged;         // 40: children whose blob is complete
  uint64_t merged_cpu_ns;  // 48: their CPU, by their own clocks
  uint64_t fell_back;      // 56: children that found no room and wrote their own files
  uint64_t start_real_ns;  // 64: when the owner made the area
  char stem[256];          // 72: the owner's file stem then
  uint32_t nslots;         // 328: slots taken (may pass slot_max)
  uint32_t slot_max;       // 332: slots in the index (slots_for)
  uint64_t data_off;       // 336: where the blobs begin (data_off_for)
};
static_assert(sizeof(Header) <= kHeaderBytes, "the header fits its page");

// A slot's state: kWriting while its child writes; then either the child
// publishes it (CAS to kReady) or the owner, done waiting at its stop, gives
// it up (CAS to kAbandoned): exactly one of the two wins, so a child knows
// whether its samples reached the owner. The owner's snapshots mark what of
// a ready blob they took (the heap's alloc_* is in every set: no mark).
enum SlotState : uint32_t { kWriting = 0, kReady = 1, kTakenCpu = 2, kTakenWait = 4, kAbandoned = 8 };

struct Slot {
  uint32_t state;   // SlotState bits
  int32_t pid;      // the child's
  uint64_t off;     // the blob's place after data_off
  uint64_t len;     // its bytes, a multiple of 8
  uint64_t cpu_ns;  // the child's CPU to its stop
};

// One slot per 4 KiB of the file (a child's blob is 1-4 KiB), 16 to 65536:
// 16384 children, a 512 KiB index, in the default 64 MiB.
inline uint32_t slots_for(uint64_t size) {
  const uint64_t n = size / 4096;
  return uint32_t(n < 16 ? 16 : n > 65536 ? 65536 : n);
}
inline uint64_t data_off_for(uint32_t slots) { return kHeaderBytes + uint64_t(slots) * sizeof(Slot); }

struct BlobHeader {
  uint32_t records;  // Records that follow
  uint32_t pad;
};

enum Kind : uint32_t { kCpu = 1, kWait = 2, kHeap = 3 };

// A stack as its table has it (stack_table.h; the heap's as jemalloc dumped
// it: return addresses), then depth addresses.
struct Record {
  uint32_t kind;
  uint32_t depth;
  int32_t tid;
  uint32_t tag;           // the wait's call
  uint64_t count, weight;  // the table's counters; the heap's alloc_objects, alloc_space
  char name[16];           // the thread's name then
};
static_assert(sizeof(Record) % 8 == 0 && sizeof(BlobHeader) % 8 == 0, "records stay 8-aligned");

}  // namespace area
}  // namespace forks
