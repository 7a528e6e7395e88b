// heap_dump: reads jemalloc's heap_v2 dump text into records whose counts
// are unsampled estimates of the true totals. Pure: no I/O, no mallctl.
#pragma once
#include <stdint.h>
#include <string>
#include <vector>

namespace heap_dump {

struct Record {
  std::vector<uint64_t> pcs;  // as dumped: return addresses, allocator first
  double alloc_objects = 0, alloc_space = 0, inuse_objects = 0, inuse_space = 0;
};

struct Dump {
  uint64_t period = 0;  // mean bytes between samples (2^lg_prof_sample)
  std::vector<Record> records;
};

// False with *err if the text is not a heap_v2 dump.
bool parse(const std::string& text, Dump* out, std::string* err);

// jeprof's estimate for n sampled objects of s bytes in all, at a mean
// period: each object of size x was sampled with probability 1-exp(-x/period),
// so both counts are scaled by 1/(1-exp(-(s/n)/period)). jemalloc 5.3 dumps
// counts pre-biased (opt.prof_unbias) so that this per-stack formula is
// unbiased even when one stack allocates objects of different sizes.
void unsample(double n, double s, uint64_t period, double* n_out, double* s_out);

}  // namespace heap_dump
