/* mallinfo2 is glibc 2.33's (Debian 12 on); before it (Debian 11), glibc
 * has only mallinfo, the same figures in ints that wrap past 2 GiB, which
 * these workloads never reach. There they read them through mallinfo,
 * which the shim answers as it answers mallinfo2. */
#pragma once
#include <malloc.h>

#if defined(__GLIBC__) && !__GLIBC_PREREQ(2, 33)
#include <stddef.h>
struct mallinfo2 {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
static inline struct mallinfo2 mallinfo2_from_mallinfo(void) {
  struct mallinfo m = mallinfo();
  struct mallinfo2 r = {(unsigned)m.arena,  (unsigned)m.ordblks, (unsigned)m.smblks,   (unsigned)m.hblks,
                        (unsigned)m.hblkhd, (unsigned)m.usmblks, (unsigned)m.fsmblks,  (unsigned)m.uordblks,
                        (unsigned)m.fordblks, (unsigned)m.keepcost};
  return r;
}
#define mallinfo2() mallinfo2_from_mallinfo()
#endif
