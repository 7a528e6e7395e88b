// malloc_api: jemalloc's own API as the program sees it. mallocx and the
// rest of jemalloc's public functions are exported as they are; mallctl and
// mallctlbymib pass through a filter that keeps the heap profiler's
// switches the shim's while it profiles; and a libjemalloc the program
// itself loaded is checked to speak the same API. Not signal-safe.
#pragma once
#include <string>

namespace malloc_api {

// From now on, the program's mallctl writes to prof.* and
// thread.prof.active (by name or by MIB) fail with EPERM; reads still
// answer. Called once the heap profile is running; lasts for the image.
void claim_profiling();

// False, with the reason, if a libjemalloc the program loaded is of a
// version whose mallocx flags or mallctl API differ from the shim's
// jemalloc (anything but 4.x and 5.x): its calls reach the shim's jemalloc.
bool program_jemalloc_compatible(std::string* err);

}  // namespace malloc_api
