// demo: the program `make demo` profiles. A toy "indexer": it parses
// records (CPU), hashes them into an index (CPU, and memory held at
// build_index), keeps a page cache (memory held at fill_cache) and
// compresses a summary (CPU). Runs ~1.5 s and prints one line of results.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 400000
#define INDEX_SLOTS (1u << 21)        /* 2 Mi slots * 8 B = 16 MiB */
#define CACHE_PAGES 3072              /* 3072 * 4 KiB = 12 MiB */

struct record { uint64_t key; uint32_t len; uint32_t sum; };

static struct record* records;
static uint64_t* index_slots;
char* cache_pages[CACHE_PAGES];  // not static: kept alive and visible

__attribute__((noinline, noclone)) uint64_t parse_records(int rounds) {
  uint64_t seed = 88172645463325252ULL, total = 0;
  records = malloc(sizeof(struct record) * RECORDS);
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < RECORDS; i++) {
      seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
      records[i].key = seed;
      records[i].len = (uint32_t)(seed % 1500);
      records[i].sum = (uint32_t)(seed >> 40);
      total += records[i].len;
    }
  }
  return total;
}

__attribute__((noinline, noclone)) uint64_t build_index(int rounds) {
  uint64_t collisions = 0;
  index_slots = calloc(INDEX_SLOTS, sizeof(uint64_t));
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < RECORDS; i++) {
      uint64_t h = records[i].key * 0x9E3779B97F4A7C15ULL;
      uint32_t slot = (uint32_t)(h >> 43);
      while (index_slots[slot] != 0 && index_slots[slot] != records[i].key) {
        collisions++;
        slot = (slot + 1) & (INDEX_SLOTS - 1);
      }
      index_slots[slot] = records[i].key;
    }
  }
  return collisions;
}

__attribute__((noinline, noclone)) void fill_cache(void) {
  for (int i = 0; i < CACHE_PAGES; i++) {
    cache_pages[i] = malloc(4096);
    memset(cache_pages[i], i & 0xff, 4096);
  }
}

__attribute__((noinline, noclone)) uint32_t compress_summary(int rounds) {
  uint32_t crc = 0xffffffffu;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < RECORDS; i++) {
      uint32_t v = records[i].sum;
      for (int b = 0; b < 32; b++) crc = (crc >> 1) ^ (0xEDB88320u & -((crc ^ (v >> b)) & 1u));
    }
  }
  return ~crc;
}

int main(int argc, char** argv) {
  int scale = argc > 1 ? atoi(argv[1]) : 120;
  uint64_t bytes = parse_records(scale * 4);
  fill_cache();
  uint64_t collisions = build_index(scale);
  uint32_t crc = compress_summary(scale / 2 + 1);
  printf("demo: %d records parsed %llu bytes, %llu index collisions, summary crc %08x, "
         "holding %d KiB index + %d KiB cache\n",
         RECORDS, (unsigned long long)bytes, (unsigned long long)collisions, crc,
         (int)(INDEX_SLOTS * sizeof(uint64_t) / 1024), CACHE_PAGES * 4);
  return 0;
}
