// test_files: a whole file read into a string and written back, for the unit
// tests that corrupt, truncate or inspect what the shim wrote.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void spill(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}
