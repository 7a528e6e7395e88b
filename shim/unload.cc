// unload: see unload.h. Filled in by the symbolization work (issue 4).
#include "unload.h"

namespace unload {

void before_dlclose(void*) {}

}  // namespace unload
