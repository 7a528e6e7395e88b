// export: how the shim marks a symbol it interposes, the only kind it
// exports (shim/exports.list; scripts/check-exports holds the library to
// it). Everything else is hidden by -fvisibility=hidden. One spelling per
// meaning, so a wrapper's section is said by which macro it uses:
//   EXPORT               an interposed function, in the ordinary text
//   EXPORT_ALLOC         a malloc-family entry point: in the allocator's
//                        section, where every heap stack is cut (wrappers.h)
//   EXPORT_WAIT_WRAPPER  a blocking call the wait profile times: in its own
//                        section, so a stack can tell the wrapper's frame
//                        (wrappers::in_wait), never inlined into another
#pragma once
#include "wrappers.h"

#define EXPORT extern "C" __attribute__((visibility("default")))
#define EXPORT_ALLOC EXPORT PROFSHIM_ALLOC
#define EXPORT_WAIT_WRAPPER EXPORT PROFSHIM_WAIT
