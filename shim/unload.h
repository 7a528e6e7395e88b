// unload: keeps what symbolization needs of a library that the program
// dlclose()s before the stop, so samples taken in its code are still named
// at the stop. Not signal-safe: called from the dlclose hook.
#pragma once

namespace unload {

// Before the real dlclose(handle): if the library may be unmapped, records
// the names of the sampled addresses that lie in it.
void before_dlclose(void* handle);

}  // namespace unload
