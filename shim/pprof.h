// pprof: builds one profile.proto message (github.com/google/pprof
// proto/profile.proto) from samples whose frames are already symbolized.
// Interns strings, functions, locations and mappings; check_valid() enforces
// the invariants go tool pprof relies on before anything is encoded.
// Not signal-safe: runs only at the stop, on the stop thread.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pprof {

struct ValueType { std::string type, unit; };

struct Mapping {
  uint64_t start = 0, limit = 0, offset = 0;
  std::string file;      // path as in /proc/self/maps
  std::string build_id;  // lowercase hex, empty if unknown
  bool has_functions = false, has_filenames = false;
  bool has_line_numbers = false, has_inline_frames = false;
};

// One source-level frame; a Location holds several when code was inlined.
struct Frame {
  std::string name;         // demangled
  std::string system_name;  // as in the symbol table (mangled); may be empty
  std::string file;         // empty if unknown
  int64_t line = 0;         // 0 if unknown
  int64_t start_line = 0;
};

struct Label { std::string key, str; int64_t num = 0; std::string num_unit; bool is_num = false; };

class Builder {
 public:
  Builder(std::vector<ValueType> sample_types, ValueType period_type, int64_t period);

  // Returns a mapping id (1-based). Mappings must not overlap.
  uint64_t add_mapping(const Mapping& m);
  // Returns a location id (1-based) for (address, mapping_id, frames);
  // identical inputs give the same id. frames are innermost first; an empty
  // frames vector is allowed (an address pprof shows with its mapping).
  // mapping_id 0 means none.
  uint64_t add_location(uint64_t address, uint64_t mapping_id, const std::vector<Frame>& frames);
  // location_ids are leaf first; values has one entry per sample type.
  void add_sample(const std::vector<uint64_t>& location_ids, const std::vector<int64_t>& values,
                  const std::vector<Label>& labels = {});

  void set_default_sample_type(const std::string& type);
  // profile.proto's drop_frames: a regular expression pprof matches whole
  // against each frame's function name, hiding a match and its callees.
  void set_drop_frames(const std::string& regex);
  void set_time(int64_t time_nanos, int64_t duration_nanos);
  void add_comment(const std::string& c);

  // Empty string when valid, else what is wrong.
  std::string check_valid() const;
  // The serialized (uncompressed) profile.proto message.
  std::string encode() const;

  struct Impl;
  ~Builder();
 private:
  Impl* impl_;
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;
};

}  // namespace pprof
