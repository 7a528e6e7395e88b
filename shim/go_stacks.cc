// go_stacks: see go_stacks.h. Reads only the runtime's own structures, each
// word with the bounds checks a wrong guess could not pass (the goroutine
// named as the thread's must name the thread's m back, its saved stack
// pointer must lie in its stack); signal-safe: no allocation, no lock, no
// call but the table lookups.
#include "go_stacks.h"

#include <string.h>

#include "go_unwind.h"

namespace go_stacks {
namespace {

intptr_t g_tls;  // 0: no crossing
// Byte offsets: the goroutine's m (g.m), the m's current user goroutine
// (m.curg), the goroutine's saved stack pointer (g.sched.sp; the saved pc
// follows it in gobuf).
uint32_t g_m_off, g_curg_off, g_sched_off;

uintptr_t thread_pointer() {
  uintptr_t tp;
  __asm__("movq %%fs:0, %0" : "=r"(tp));
  return tp;
}

uintptr_t word(uintptr_t base, uint32_t off) { return *reinterpret_cast<const uintptr_t*>(base + off); }

// A memory operand "disp(%base)" of a REX.W mov at p (opcode 0x8b): its
// ModRM's mod 1 (disp8) or 2 (disp32) with the wanted registers. Returns
// the instruction's length, 0 if p is not that instruction.
int mov_load(const unsigned char* p, int reg, int base, uint32_t* disp) {
  if (p[0] != 0x48 || p[1] != 0x8b || (p[2] & 7) != base || ((p[2] >> 3) & 7) != reg) return 0;
  if ((p[2] >> 6) == 1) return *disp = p[3], 4;
  if ((p[2] >> 6) == 2) return memcpy(disp, p + 3, 4), 7;
  return 0;
}

}  // namespace

void learn(intptr_t g_tls_off) {
  const uint64_t entry = go_unwind::switch_entry(go_unwind::kSystemstack);
  // runtime.systemstack's way back, after it called its function on g0:
  //   MOVQ g_m(AX), BX; MOVQ m_curg(BX), AX; (g back into TLS);
  //   MOVQ (g_sched+gobuf_sp)(AX), SP
  // (registers ax 0, bx 3, sp 4). Its code is some 130 bytes.
  constexpr int kRead = 192;
  if (!g_tls_off || !entry || !go_unwind::in_go(entry + kRead)) return;
  const auto* code = reinterpret_cast<const unsigned char*>(entry);
  for (int i = 0; i + 40 < kRead; ++i) {
    uint32_t m_off, curg_off, sched_off;
    int a = mov_load(code + i, 3, 0, &m_off);
    int b = a ? mov_load(code + i + a, 0, 3, &curg_off) : 0;
    if (!b) continue;
    // The store of g into TLS between them: at most 12 bytes.
    for (int j = i + a + b; j < i + a + b + 16 && j + 7 < kRead; ++j) {
      if (mov_load(code + j, 4, 0, &sched_off)) {
        if (m_off % 8 || curg_off % 8 || sched_off % 8 || curg_off > 4096 || sched_off > 512) return;
        g_m_off = m_off, g_curg_off = curg_off, g_sched_off = sched_off;
        g_tls = g_tls_off;
        return;
      }
    }
  }
}

int walk(uint64_t pc, uintptr_t sp, uintptr_t lo, uintptr_t hi, uint64_t* frames, int n, int max) {
  go_unwind::Switch at;
  const int first = n;
  n = go_unwind::walk(pc, sp, lo, hi, frames, n, max, &at);
  // Interrupted inside the switch itself (n == first): its stack is half
  // changed; nothing more.
  if (!g_tls || n == first || n >= max || (at != go_unwind::kSystemstack && at != go_unwind::kMorestack)) return n;
  const uintptr_t g = *reinterpret_cast<const uintptr_t*>(thread_pointer() + g_tls);
  if (!g) return n;
  const uintptr_t m = word(g, g_m_off);
  // On the scheduler's stack (g is m.g0, m's first word), running for a
  // user goroutine that names this m.
  if (!m || word(m, 0) != g) return n;
  const uintptr_t curg = word(m, g_curg_off);
  if (!curg || curg == g || curg % 8 || word(curg, g_m_off) != m) return n;
  const uintptr_t glo = word(curg, 0), ghi = word(curg, 8);
  const uintptr_t gsp = word(curg, g_sched_off), gpc = word(curg, g_sched_off + 8);
  if (glo >= ghi || gsp < glo || gsp + 8 > ghi) return n;
  if (at == go_unwind::kMorestack) {
    // The function that asked for more stack, at its call to morestack,
    // with its frame not yet made: its pc, and its callers from there.
    if (!go_unwind::in_go(gpc)) return n;
    frames[n++] = gpc;
    return go_unwind::walk(gpc, gsp, glo, ghi, frames, n, max, &at);
  }
  // systemstack saved the stack pointer at its own frame, whose slot holds
  // the return address into its caller.
  const uint64_t ret = *reinterpret_cast<const uint64_t*>(gsp);
  if (!go_unwind::in_go(ret)) return n;
  frames[n++] = ret;
  return go_unwind::walk(ret, gsp + 8, glo, ghi, frames, n, max, &at);
}

}  // namespace go_stacks
