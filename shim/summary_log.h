// summary_log: where an image's summary line goes. Without PROFILE_LOG, to
// stderr (errline.h), as always. With it, every image's line is appended to
// that file, and stderr keeps only the lines an operator asked for: the
// image that writes NAME.* (the program they ran: the root's last image, or
// the daemon that takes NAME), the images PROFILE_ONLY picked, and any
// line that reports an error. A process tree (a pyenv shim: bash, env,
// readlink, python) then prints one line, not seventy (docs/CONFIG.md,
// "Process trees").
#pragma once
#include <string>

namespace summary_log {

// At setup, once PROFILE_DIR is absolute: the log's path (a relative
// PROFILE_LOG is in dir), or none.
void setup(const std::string& dir, const std::string& log);
// The line appended to the log, if any, and written to stderr as well when
// on_stderr or when there is no log or it cannot be written. Each line is
// one write to a file opened for it (O_APPEND) and closed: lines of images
// that stop at once do not interleave, and no descriptor stays open.
// Signal-safe (a stop's watchdog reports through it).
void line(const char* text, bool on_stderr);

}  // namespace summary_log
