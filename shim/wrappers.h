// wrappers: the address range of the shim's frames that stand between the
// program's own frames (the wrapper around main, the thread-start
// trampoline). Functions placed in this section never show in a profile.
#pragma once
#include <stdint.h>

#define PROFSHIM_WRAPPER __attribute__((section("profshim_wrap"), noinline, used))

namespace wrappers {
uint64_t begin();
uint64_t end();
}  // namespace wrappers
