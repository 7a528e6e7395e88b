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
constexpr unsigned kMaxMore = 128;  // frames added to an allocation's stack
constexpr uintptr_t kCgoArea = 128;  // asmcgocall's area below g0's saved stack pointer (64 bytes, aligned, in Go 1.19)

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

int resume(uint64_t* frames, int n, int max) {
  if (!g_tls || n >= max) return n;
  const uintptr_t g = *reinterpret_cast<const uintptr_t*>(thread_pointer() + g_tls);
  if (!g) return n;
  const uintptr_t m = word(g, g_m_off);
  // On the scheduler's stack (g is m.g0, m's first word), running for a
  // user goroutine that names this m: its saved state is the one it left
  // its own stack with (the switch writes it; the scheduler's own work runs
  // with no goroutine).
  if (!m || word(m, 0) != g) return n;
  const uintptr_t curg = word(m, g_curg_off);
  if (!curg || curg == g || curg % 8 || word(curg, g_m_off) != m) return n;
  const uintptr_t lo = word(curg, 0), hi = word(curg, 8);
  const uintptr_t sp = word(curg, g_sched_off), pc = word(curg, g_sched_off + 8);
  if (lo >= hi || sp < lo || sp + 8 > hi || !go_unwind::in_go(pc)) return n;
  go_unwind::Switch at;
  if (go_unwind::start_of(pc) == go_unwind::switch_entry(go_unwind::kSystemstackSwitch)) {
    // systemstack and asmcgocall saved the stack pointer at their own frame
    // (no frame of their own: its first slot is the return address into
    // their caller) and a pc that stands for them.
    const uint64_t ret = *reinterpret_cast<const uint64_t*>(sp);
    if (!go_unwind::in_go(ret)) return n;
    frames[n++] = ret;
    return go_unwind::walk(ret, sp + 8, lo, hi, frames, n, max, &at);
  }
  // morestack saved the function that asked for more stack at its call,
  // its frame not yet made: that pc, and its callers from there.
  frames[n++] = pc;
  return go_unwind::walk(pc, sp, lo, hi, frames, n, max, &at);
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
  if (n == first || (at != go_unwind::kSystemstack && at != go_unwind::kMorestack)) return n;
  return resume(frames, n, max);
}

int after_c(uintptr_t sp, uint64_t* frames, int n, int max) {
  const uint64_t entry = go_unwind::switch_entry(go_unwind::kAsmcgocall);
  if (!g_tls || !entry || !sp || n >= max) return n;
  const uintptr_t g = *reinterpret_cast<const uintptr_t*>(thread_pointer() + g_tls);
  if (!g) return n;
  const uintptr_t m = word(g, g_m_off);
  if (!m || word(m, 0) != g) return n;
  // asmcgocall calls C from the top of the scheduler stack (g0's saved
  // stack pointer, less an aligned area of its own): its return address
  // lies in the few words below, above the C frames the walk went through.
  const uintptr_t lo = word(g, 0), hi = word(g, 8), top = word(g, g_sched_off);
  if (lo >= hi || top <= lo || top > hi || top % 8) return n;
  for (uintptr_t a = top - 8; a >= sp && a >= lo && a + kCgoArea >= top; a -= 8) {
    const uint64_t ret = *reinterpret_cast<const uint64_t*>(a);
    if (go_unwind::start_of(ret) != entry) continue;
    frames[n++] = ret;
    return resume(frames, n, max);
  }
  return n;
}

unsigned after_c_frame(void** frames, unsigned n, unsigned max) {
  const uint64_t entry = go_unwind::switch_entry(go_unwind::kAsmcgocall);
  if (!g_tls || !entry || n == 0 || n >= max) return n;
  if (go_unwind::start_of(reinterpret_cast<uint64_t>(frames[n - 1])) != entry) return n;
  uint64_t more[kMaxMore];
  const int got = resume(more, 0, int(max - n < kMaxMore ? max - n : kMaxMore));
  for (int i = 0; i < got; ++i) frames[n + i] = reinterpret_cast<void*>(more[i]);
  return n + unsigned(got);
}

}  // namespace go_stacks
