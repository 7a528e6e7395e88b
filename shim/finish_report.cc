// finish_report: the line of a stop that ended early or was given up,
// naming what it wrote before; see finish.h.
#include <string.h>

#include "atomic_file.h"
#include "finish.h"
#include "summary_log.h"
#include "sys.h"

namespace finish {
namespace {

// Appends what was written so far, as the writer recorded it (signal-safe:
// no allocation).
size_t append_written(const Context& ctx, char* buf, size_t len, size_t cap) {
  auto put = [&](const char* t) {
    for (; *t && len + 1 < cap; ++t) buf[len++] = *t;
  };
  int n = atomic_file::renamed_count();
  if (n == 0) put("; wrote no profile");
  for (int i = 0; i < n; ++i) {
    put(i == 0 ? "; wrote " : " ");
    put(atomic_file::renamed_path(i));
  }
  buf[len] = 0;
  return len;
}

}  // namespace

void report_failure(Context& ctx, const char* why) {
  sys::DescriptorRoom::give_back();  // a stop left by its recovery ran no destructor
  if (ctx.reported.exchange(true)) return;
  char buf[3072] = "error: the stop ended early: ";
  size_t len = strlen(buf);
  for (const char* t = why; *t && len + 1 < sizeof buf; ++t) buf[len++] = *t;
  append_written(ctx, buf, len, sizeof buf);
  summary_log::line(buf, true);
}

void report_timeout(Context& ctx) {
  sys::DescriptorRoom::give_back();  // the program goes on while the stop may still run
  if (ctx.reported.exchange(true)) return;
  char buf[3072] = "error: the stop did not finish within ";
  size_t len = strlen(buf);
  for (const char* t = ctx.timeout_text; *t && len + 1 < sizeof buf; ++t) buf[len++] = *t;
  const char* mid = " s (PROFILE_STOP_TIMEOUT): gave up, the process ends as it would have";
  for (const char* t = mid; *t && len + 1 < sizeof buf; ++t) buf[len++] = *t;
  append_written(ctx, buf, len, sizeof buf);
  summary_log::line(buf, true);
}

}  // namespace finish
