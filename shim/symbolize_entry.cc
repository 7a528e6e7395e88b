// symbolize_entry: an entry of the symbol cache read without unpacking it,
// and written back by appending to its bytes. A compiler's entry holds
// ~7,000 addresses of which one image asks ~2,000, and gains ~400: making
// every result a Result (strings and all) at the read, again at the write's
// re-read, and encoding the whole again took ~20% of a cc1plus stop. Here
// the read checks the whole file (checksum, every count, length and string
// number, one result per address: as decode() always did) and indexes the
// results by address; a result is unpacked when it is asked for. The write
// keeps the entry's strings and results as they are and appends the new
// ones (strings it already has are not added again). See symbolize_cache.cc
// for the layout.
#include <string.h>

#include <algorithm>
#include <string_view>

#include "symbolize_cache.h"
#include "symbolize_wire.h"

namespace symbolize {
namespace cache {
namespace {


constexpr size_t kFrameSize = 3 * 4 + 2 * 8, kResultSize = 8 + 1 + 4;

}  // namespace

bool parse(std::string bytes, Parsed* out) {
  Parsed p;
  p.bytes = std::move(bytes);
  const std::string& b = p.bytes;
  if (b.size() < sizeof kEntryMagic + 8 || memcmp(b.data(), kEntryMagic, sizeof kEntryMagic) != 0) return false;
  uint64_t sum;
  memcpy(&sum, b.data() + b.size() - 8, 8);
  if (sum != checksum(b.data(), b.size() - 8)) return false;
  wire::Reader r{b, sizeof kEntryMagic, b.size() - 8};
  const uint32_t id = r.count(1);
  if (r.skip(id)) p.build_id.assign(b, r.pos - id, id);
  if (!r.ok || !get_witnesses(b, &r.pos, &p.witnesses) || r.pos > r.end) return false;
  p.strings.resize(r.count(4));
  p.strings_at = r.pos;
  for (auto& s : p.strings) {
    const uint32_t n = r.count(1);
    s = {uint32_t(r.pos), n};
    r.skip(n);
  }
  p.results_at = r.pos;
  p.index.resize(r.count(kResultSize));
  for (auto& x : p.index) {
    x = {r.get(8), uint32_t(r.pos)};
    r.skip(1);
    for (uint32_t k = r.count(kFrameSize); k-- > 0 && r.ok;)
      for (int j = 0; j < 3; ++j)
        if (r.get(4) >= p.strings.size()) return false;
        else if (j == 2) r.skip(16);
  }
  if (!r.ok || r.pos != r.end) return false;
  std::sort(p.index.begin(), p.index.end());
  for (size_t i = 1; i < p.index.size(); ++i)
    if (p.index[i].first == p.index[i - 1].first) return false;  // one result per address
  *out = std::move(p);
  return true;
}

bool Parsed::result(uint64_t addr, Result* out) const {
  auto it = std::lower_bound(index.begin(), index.end(), std::make_pair(addr, uint32_t(0)));
  if (it == index.end() || it->first != addr) return false;
  wire::Reader r{bytes, it->second, bytes.size() - 8};
  *out = Result();
  out->inlines_known = r.get(1) != 0;
  auto str = [&](uint64_t i) { return std::string(bytes, strings[i].first, strings[i].second); };
  for (uint32_t k = r.count(kFrameSize); k-- > 0;) {
    pprof::Frame f;
    f.name = str(r.get(4)), f.system_name = str(r.get(4)), f.file = str(r.get(4));
    f.line = int64_t(r.get(8)), f.start_line = int64_t(r.get(8));
    out->frames.push_back(std::move(f));
  }
  return true;
}

std::string merge(const std::string& build_id, const std::vector<Witness>& witnesses, const Parsed* old,
                  const std::unordered_map<uint64_t, Result>& fresh) {
  std::string out(kEntryMagic, sizeof kEntryMagic);
  using wire::put32;
  using wire::put64;
  put32(&out, uint32_t(build_id.size()));
  out += build_id;
  put_witnesses(&out, witnesses);
  std::unordered_map<std::string_view, uint32_t> number;
  uint32_t strings = 0, results = 0;
  if (old) {
    for (const auto& s : old->strings) number.emplace(std::string_view(old->bytes.data() + s.first, s.second), strings++);
    results = uint32_t(old->index.size());
  }
  std::vector<const std::string*> added;
  auto intern = [&](const std::string& s) {
    auto it = number.emplace(std::string_view(s), strings);
    if (it.second) added.push_back(&s), ++strings;
    return it.first->second;
  };
  std::vector<std::pair<uint64_t, const Result*>> sorted;
  for (const auto& f : fresh) {
    auto at = old ? std::lower_bound(old->index.begin(), old->index.end(), std::make_pair(f.first, uint32_t(0)))
                  : std::vector<std::pair<uint64_t, uint32_t>>::const_iterator();
    if (!old || at == old->index.end() || at->first != f.first) sorted.emplace_back(f.first, &f.second);
  }
  std::sort(sorted.begin(), sorted.end());
  std::string records;
  for (const auto& r : sorted) {
    put64(&records, r.first);
    records += char(r.second->inlines_known);
    put32(&records, uint32_t(r.second->frames.size()));
    for (const pprof::Frame& f : r.second->frames) {
      put32(&records, intern(f.name)), put32(&records, intern(f.system_name)), put32(&records, intern(f.file));
      put64(&records, uint64_t(f.line)), put64(&records, uint64_t(f.start_line));
    }
  }
  results += uint32_t(sorted.size());
  put32(&out, strings);
  if (old) out.append(old->bytes, old->strings_at, old->results_at - old->strings_at);
  for (const std::string* s : added) put32(&out, uint32_t(s->size())), out += *s;
  put32(&out, results);
  if (old) out.append(old->bytes, old->results_at + 4, old->bytes.size() - 8 - old->results_at - 4);
  out += records;
  put64(&out, checksum(out.data(), out.size()));
  return out;
}

}  // namespace cache
}  // namespace symbolize
