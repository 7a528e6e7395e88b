// options_dump: prints the shim's option table (shim/config.cc) as
// tab-separated lines "VARIABLE<TAB>DEFAULT<TAB>HELP", so that `profshim
// --help` is generated from the table the shim parses, never a copy of it.
// Built and run by the Makefile into build/profshim-options.tsv.
#include <cstdio>
#include <cstring>

#include "config.h"

int main() {
  int n = 0;
  const config::Var* v = config::vars(&n);
  for (int i = 0; i < n; ++i) {
    for (const char* s : {v[i].name, v[i].def, v[i].help})
      if (std::strpbrk(s, "\t\n")) {
        std::fprintf(stderr, "options_dump: %s: a tab or newline in the table\n", v[i].name);
        return 1;
      }
    std::printf("%s\t%s\t%s\n", v[i].name, v[i].def, v[i].help);
  }
  return std::fflush(stdout) == 0 && n > 0 ? 0 : 1;
}
