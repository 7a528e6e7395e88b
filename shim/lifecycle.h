// lifecycle: the process image's profiling state machine
// (INERT | RUNNING -> STOPPING -> DONE), the one constructor that sets
// profiling up (fail-fast: exit 78 on a setup error), the stop thread that
// runs finish::run, and the bounded wait every stop path goes through.
#pragma once

namespace lifecycle {

// True from a successful setup until the stop completes.
bool active();
// Asks for the image's profiles and waits for them, at most the stop
// timeout. Idempotent and race-free: the first caller starts the stop, every
// caller (a second thread in exit, say) waits for the same one.
void stop(const char* how);

}  // namespace lifecycle
