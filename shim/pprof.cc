// pprof: interns a profile's strings, functions, locations and mappings, checks
// the invariants go tool pprof relies on, and encodes profile.proto through pb.
// Field numbers mirror github.com/google/pprof proto/profile.proto.
#include "pprof.h"

#include <algorithm>
#include <unordered_map>

#include "pb.h"

namespace pprof {

// Field numbers, one namespace per message of profile.proto.
namespace field {
namespace Profile {
constexpr uint32_t sample_type = 1, sample = 2, mapping = 3, location = 4, function = 5,
                   string_table = 6, drop_frames = 7, keep_frames = 8, time_nanos = 9,
                   duration_nanos = 10, period_type = 11, period = 12, comment = 13,
                   default_sample_type = 14;
}
namespace ValueType { constexpr uint32_t type = 1, unit = 2; }
namespace Sample { constexpr uint32_t location_id = 1, value = 2, label = 3; }
namespace Label { constexpr uint32_t key = 1, str = 2, num = 3, num_unit = 4; }
namespace Mapping {
constexpr uint32_t id = 1, memory_start = 2, memory_limit = 3, file_offset = 4, filename = 5,
                   build_id = 6, has_functions = 7, has_filenames = 8, has_line_numbers = 9,
                   has_inline_frames = 10;
}
namespace Location { constexpr uint32_t id = 1, mapping_id = 2, address = 3, line = 4, is_folded = 5; }
namespace Line { constexpr uint32_t function_id = 1, line = 2; }
namespace Function {
constexpr uint32_t id = 1, name = 2, system_name = 3, filename = 4, start_line = 5;
}
}  // namespace field

namespace {

// Every id below is its record's index + 1, so ids are nonzero and unique by
// construction; check_valid() only has to check references.
struct FunctionRec {
  int64_t name, system_name, filename, start_line;
  bool operator==(const FunctionRec& o) const {
    return name == o.name && system_name == o.system_name && filename == o.filename &&
           start_line == o.start_line;
  }
};
struct LineRec { uint64_t function_id; int64_t line; };
struct LocationRec {
  uint64_t address, mapping_id;
  std::vector<LineRec> lines;
  bool operator==(const LocationRec& o) const {
    if (address != o.address || mapping_id != o.mapping_id || lines.size() != o.lines.size())
      return false;
    for (size_t i = 0; i < lines.size(); ++i)
      if (lines[i].function_id != o.lines[i].function_id || lines[i].line != o.lines[i].line)
        return false;
    return true;
  }
};
struct MappingRec { Mapping m; int64_t filename, build_id; };
struct LabelRec { int64_t key, str, num, num_unit; };
struct SampleRec {
  std::vector<uint64_t> location_ids;
  std::vector<int64_t> values;
  std::vector<LabelRec> labels;
};

uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

struct RecHash {
  size_t operator()(const FunctionRec& f) const {
    return mix(mix(mix(mix(0, f.name), f.system_name), f.filename), f.start_line);
  }
  size_t operator()(const LocationRec& l) const {
    uint64_t h = mix(mix(0, l.address), l.mapping_id);
    for (const LineRec& ln : l.lines) h = mix(mix(h, ln.function_id), ln.line);
    return h;
  }
};

}  // namespace

struct Builder::Impl {
  std::vector<std::string> strings{""};  // string_table[0] must be ""
  std::unordered_map<std::string, int64_t> string_ids{{"", 0}};
  std::vector<ValueType> sample_types;
  std::vector<std::pair<int64_t, int64_t>> sample_type_ids;
  std::pair<int64_t, int64_t> period_type_ids;
  int64_t period = 0, time_nanos = 0, duration_nanos = 0;
  std::string default_type;
  int64_t default_type_id = 0;
  std::vector<int64_t> comments;
  int64_t drop_frames_id = 0;
  std::vector<MappingRec> mappings;
  std::vector<FunctionRec> functions;
  std::unordered_map<FunctionRec, uint64_t, RecHash> function_ids;
  std::vector<LocationRec> locations;
  std::unordered_map<LocationRec, uint64_t, RecHash> location_ids;
  std::vector<SampleRec> samples;
  // A sample's stack and labels -> its index: two with the same are one
  // (pprof merges them when it reads a profile; a file that already has
  // them merged is read alike by every reader, ours among them).
  std::unordered_map<std::string, size_t> sample_index;

  int64_t intern(const std::string& s) {
    auto it = string_ids.emplace(s, static_cast<int64_t>(strings.size()));
    if (it.second) strings.push_back(s);
    return it.first->second;
  }
  uint64_t function_id(const Frame& f) {
    FunctionRec rec{intern(f.name), intern(f.system_name), intern(f.file), f.start_line};
    auto it = function_ids.emplace(rec, functions.size() + 1);
    if (it.second) functions.push_back(rec);
    return it.first->second;
  }
};

Builder::Builder(std::vector<ValueType> sample_types, ValueType period_type, int64_t period)
    : impl_(new Impl) {
  // Braced lists evaluate left to right (function arguments need not), which
  // keeps the string table in a stable, readable order.
  for (const ValueType& vt : sample_types)
    impl_->sample_type_ids.push_back({impl_->intern(vt.type), impl_->intern(vt.unit)});
  impl_->sample_types = std::move(sample_types);
  impl_->period_type_ids = {impl_->intern(period_type.type), impl_->intern(period_type.unit)};
  impl_->period = period;
}

Builder::~Builder() { delete impl_; }

uint64_t Builder::add_mapping(const Mapping& m) {
  impl_->mappings.push_back({m, impl_->intern(m.file), impl_->intern(m.build_id)});
  return impl_->mappings.size();
}

uint64_t Builder::add_location(uint64_t address, uint64_t mapping_id,
                               const std::vector<Frame>& frames) {
  LocationRec rec{address, mapping_id, {}};
  rec.lines.reserve(frames.size());
  for (const Frame& f : frames) rec.lines.push_back({impl_->function_id(f), f.line});
  auto it = impl_->location_ids.emplace(rec, impl_->locations.size() + 1);
  if (it.second) impl_->locations.push_back(std::move(rec));
  return it.first->second;
}

void Builder::add_sample(const std::vector<uint64_t>& location_ids,
                         const std::vector<int64_t>& values, const std::vector<Label>& labels) {
  SampleRec s{location_ids, values, {}};
  s.labels.reserve(labels.size());
  for (const Label& l : labels) {
    if (l.is_num)
      s.labels.push_back({impl_->intern(l.key), 0, l.num, impl_->intern(l.num_unit)});
    else
      s.labels.push_back({impl_->intern(l.key), impl_->intern(l.str), 0, 0});
  }
  std::string key;
  key.reserve((location_ids.size() + 1 + 4 * s.labels.size()) * 8);
  const auto put = [&key](uint64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(location_ids.size());
  for (uint64_t id : location_ids) put(id);
  for (const LabelRec& l : s.labels) {
    put(l.key);
    put(l.str);
    put(l.num);
    put(l.num_unit);
  }
  auto it = impl_->sample_index.emplace(std::move(key), impl_->samples.size());
  if (!it.second) {
    SampleRec& same = impl_->samples[it.first->second];
    if (same.values.size() == values.size()) {
      for (size_t i = 0; i < values.size(); ++i) same.values[i] += values[i];
      return;
    }
    it.first->second = impl_->samples.size();  // values of another shape: kept apart, as check_valid will say
  }
  impl_->samples.push_back(std::move(s));
}

void Builder::set_default_sample_type(const std::string& type) {
  impl_->default_type = type;
  impl_->default_type_id = impl_->intern(type);
}

void Builder::set_drop_frames(const std::string& regex) { impl_->drop_frames_id = impl_->intern(regex); }

void Builder::set_time(int64_t time_nanos, int64_t duration_nanos) {
  impl_->time_nanos = time_nanos;
  impl_->duration_nanos = duration_nanos;
}

void Builder::add_comment(const std::string& c) { impl_->comments.push_back(impl_->intern(c)); }

// --- check_valid -----------------------------------------------------------

namespace {

std::string check_samples(const Builder::Impl& p) {
  if (!p.samples.empty() && p.sample_types.empty()) return "samples but no sample types";
  for (size_t i = 0; i < p.samples.size(); ++i) {
    const SampleRec& s = p.samples[i];
    if (s.values.size() != p.sample_types.size())
      return "sample " + std::to_string(i) + " has " + std::to_string(s.values.size()) +
             " values, want " + std::to_string(p.sample_types.size());
    for (uint64_t id : s.location_ids)
      if (id == 0 || id > p.locations.size())
        return "sample " + std::to_string(i) + " references unknown location " +
               std::to_string(id);
  }
  return "";
}

std::string check_locations(const Builder::Impl& p) {
  for (size_t i = 0; i < p.locations.size(); ++i) {
    const LocationRec& l = p.locations[i];
    if (l.mapping_id > p.mappings.size())
      return "location " + std::to_string(i + 1) + " references unknown mapping " +
             std::to_string(l.mapping_id);
    for (const LineRec& ln : l.lines)
      if (ln.function_id == 0 || ln.function_id > p.functions.size())
        return "location " + std::to_string(i + 1) + " references unknown function " +
               std::to_string(ln.function_id);
  }
  return "";
}

// Overlapping mappings make address -> mapping ambiguous for every reader.
std::string check_mappings(const Builder::Impl& p) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // (start, id)
  for (size_t i = 0; i < p.mappings.size(); ++i) {
    const Mapping& m = p.mappings[i].m;
    if (m.limit < m.start) return "mapping " + std::to_string(i + 1) + " ends before it starts";
    ranges.emplace_back(m.start, i + 1);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    const Mapping& prev = p.mappings[ranges[i - 1].second - 1].m;
    if (ranges[i].first < prev.limit)
      return "mappings " + std::to_string(ranges[i - 1].second) + " and " +
             std::to_string(ranges[i].second) + " overlap";
  }
  return "";
}

std::string check_default_type(const Builder::Impl& p) {
  if (p.default_type.empty()) return "";
  for (const ValueType& vt : p.sample_types)
    if (vt.type == p.default_type) return "";
  return "default sample type " + p.default_type + " is not a sample type";
}

}  // namespace

std::string Builder::check_valid() const {
  std::string err = check_samples(*impl_);
  if (err.empty()) err = check_locations(*impl_);
  if (err.empty()) err = check_mappings(*impl_);
  if (err.empty()) err = check_default_type(*impl_);
  return err;
}

// --- encode ----------------------------------------------------------------

namespace {

void encode_value_type(std::string* out, uint32_t fieldno, std::pair<int64_t, int64_t> ids) {
  pb::Mark m = pb::start_message(out, fieldno);
  pb::int64_field(out, field::ValueType::type, ids.first);
  pb::int64_field(out, field::ValueType::unit, ids.second);
  pb::commit_message(out, m);
}

void encode_sample(std::string* out, const SampleRec& s) {
  namespace F = field::Sample;
  pb::Mark m = pb::start_message(out, field::Profile::sample);
  pb::packed_uint64(out, F::location_id, s.location_ids);
  pb::packed_int64(out, F::value, s.values);
  for (const LabelRec& l : s.labels) {
    pb::Mark lm = pb::start_message(out, F::label);
    pb::int64_field(out, field::Label::key, l.key);
    pb::int64_field(out, field::Label::str, l.str);
    pb::int64_field(out, field::Label::num, l.num);
    pb::int64_field(out, field::Label::num_unit, l.num_unit);
    pb::commit_message(out, lm);
  }
  pb::commit_message(out, m);
}

void encode_mapping(std::string* out, uint64_t id, const MappingRec& r) {
  namespace F = field::Mapping;
  pb::Mark m = pb::start_message(out, field::Profile::mapping);
  pb::uint64_field(out, F::id, id);
  pb::uint64_field(out, F::memory_start, r.m.start);
  pb::uint64_field(out, F::memory_limit, r.m.limit);
  pb::uint64_field(out, F::file_offset, r.m.offset);
  pb::int64_field(out, F::filename, r.filename);
  pb::int64_field(out, F::build_id, r.build_id);
  pb::bool_field(out, F::has_functions, r.m.has_functions);
  pb::bool_field(out, F::has_filenames, r.m.has_filenames);
  pb::bool_field(out, F::has_line_numbers, r.m.has_line_numbers);
  pb::bool_field(out, F::has_inline_frames, r.m.has_inline_frames);
  pb::commit_message(out, m);
}

void encode_location(std::string* out, uint64_t id, const LocationRec& l) {
  namespace F = field::Location;
  pb::Mark m = pb::start_message(out, field::Profile::location);
  pb::uint64_field(out, F::id, id);
  pb::uint64_field(out, F::mapping_id, l.mapping_id);
  pb::uint64_field(out, F::address, l.address);
  for (const LineRec& ln : l.lines) {
    pb::Mark lm = pb::start_message(out, F::line);
    pb::uint64_field(out, field::Line::function_id, ln.function_id);
    pb::int64_field(out, field::Line::line, ln.line);
    pb::commit_message(out, lm);
  }
  pb::commit_message(out, m);
}

void encode_function(std::string* out, uint64_t id, const FunctionRec& f) {
  namespace F = field::Function;
  pb::Mark m = pb::start_message(out, field::Profile::function);
  pb::uint64_field(out, F::id, id);
  pb::int64_field(out, F::name, f.name);
  pb::int64_field(out, F::system_name, f.system_name);
  pb::int64_field(out, F::filename, f.filename);
  pb::int64_field(out, F::start_line, f.start_line);
  pb::commit_message(out, m);
}

}  // namespace

std::string Builder::encode() const {
  namespace F = field::Profile;
  const Impl& p = *impl_;
  std::string out;
  for (const auto& ids : p.sample_type_ids) encode_value_type(&out, F::sample_type, ids);
  for (const SampleRec& s : p.samples) encode_sample(&out, s);
  for (size_t i = 0; i < p.mappings.size(); ++i) encode_mapping(&out, i + 1, p.mappings[i]);
  for (size_t i = 0; i < p.locations.size(); ++i) encode_location(&out, i + 1, p.locations[i]);
  for (size_t i = 0; i < p.functions.size(); ++i) encode_function(&out, i + 1, p.functions[i]);
  for (const std::string& s : p.strings) pb::bytes_field(&out, F::string_table, s);
  pb::int64_field(&out, F::time_nanos, p.time_nanos);
  pb::int64_field(&out, F::duration_nanos, p.duration_nanos);
  encode_value_type(&out, F::period_type, p.period_type_ids);
  pb::int64_field(&out, F::period, p.period);
  pb::int64_field(&out, F::drop_frames, p.drop_frames_id);
  pb::packed_int64(&out, F::comment, p.comments);
  pb::int64_field(&out, F::default_sample_type, p.default_type_id);
  return out;
}

}  // namespace pprof
