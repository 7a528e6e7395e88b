// symbolize_own: which of the process's modules are there only for the shim.
// The shim itself, and libdw which it dlopen()s, bring libelf,
// libz, liblzma, libbz2, libgcc_s, libm: none of it is the program's, and a
// profile that lists it among the program's mappings says something untrue.
// What is the program's is what its roots need, transitively (DT_NEEDED,
// matched by soname): the executable, and every loaded object nothing else
// needs (a plugin it dlopen()ed, another preload), bar the shim's own roots.
#include <cstring>

#include "symbolize_internal.h"

namespace symbolize {
namespace internal {

namespace {

// What the shim dlopen()s for itself (symbolize.cc, gzip.cc): zlib is a
// root of its own, not only libdw's, since libdw is loaded only when needed.
const char* const kShimLoads[] = {"libdw.so.1", "libz.so.1"};

std::string base_name(const std::string& path) {
  size_t k = path.rfind('/');
  return k == std::string::npos ? path : path.substr(k + 1);
}

}  // namespace

std::vector<bool> loaded_for_shim(const std::vector<procmaps::Line>& lines,
                                  const std::vector<const procmaps::Line*>& heads,
                                  const std::vector<std::unique_ptr<ModInfo>>& mods, uint64_t self,
                                  const std::string& exe_path) {
  const size_t n = mods.size();
  std::vector<Dynamic> dyn(n);
  std::vector<bool> shim_root(n, false), needed(n, false), program(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (heads[i] && !mods[i]->vdso) dynamic_from_memory(lines, *heads[i], &dyn[i]);
    const bool exe = mods[i]->path == exe_path;
    if (!exe && mods[i]->low <= self && self < mods[i]->high) shim_root[i] = true;
    for (const char* lib : kShimLoads)
      if (dyn[i].soname == lib) shim_root[i] = true;
  }
  // edges[i]: the modules i needs, by soname (or file name, for an object
  // without one).
  std::vector<std::vector<size_t>> edges(n);
  for (size_t i = 0; i < n; ++i)
    for (const std::string& want : dyn[i].needed)
      for (size_t j = 0; j < n; ++j)
        if (j != i && (dyn[j].soname == want || (dyn[j].soname.empty() && base_name(mods[j]->path) == want))) {
          edges[i].push_back(j);
          needed[j] = true;
          break;
        }
  std::vector<size_t> todo;
  for (size_t i = 0; i < n; ++i)
    if (!needed[i] && !shim_root[i]) program[i] = true, todo.push_back(i);
  while (!todo.empty()) {
    size_t i = todo.back();
    todo.pop_back();
    for (size_t j : edges[i])
      if (!program[j]) program[j] = true, todo.push_back(j);
  }
  std::vector<bool> own(n);
  for (size_t i = 0; i < n; ++i) own[i] = !program[i];
  return own;
}

}  // namespace internal
}  // namespace symbolize
