// unnamed: the summary's note appears only when most of the CPU is
// unnamed, and names the module holding most of the unnamed part.
#include "unnamed.h"

#include "check.h"

TEST(half_or_less_unnamed_says_nothing) {
  CHECK_EQ(unnamed::hint({{0, true, 50000000}, {1, false, 50000000}}, {"/a", "/b"}), std::string());
  CHECK_EQ(unnamed::hint({}, {}), std::string());
}

TEST(a_few_milliseconds_say_nothing) {
  CHECK_EQ(unnamed::hint({{0, false, unnamed::kMinWeight - 1}}, {"/a"}), std::string());
  CHECK(!unnamed::hint({{0, false, unnamed::kMinWeight}}, {"/a"}).empty());
}

TEST(names_the_module_with_most_unnamed_cpu) {
  std::string h = unnamed::hint({{0, true, 10000000}, {1, false, 30000000}, {2, false, 60000000}}, {"/bin/a", "/usr/bin/gzip", "/lib/x.so"});
  CHECK_EQ(h, std::string("cpu 90% unnamed, most in /lib/x.so: its package's debug symbols would name it "
                          "(dpkg -S /lib/x.so, then PACKAGE-dbgsym or PACKAGE-dbg)"));
}

TEST(code_of_no_file) {
  std::string h = unnamed::hint({{-1, false, 60000000}, {3, false, 10000000}, {0, true, 5000000}}, {"/bin/a"});
  CHECK_EQ(h, std::string("cpu 93% unnamed, most in code of no file (generated code: a JIT's)"));
}
