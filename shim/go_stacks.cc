// go_stacks: see go_stacks.h. Reads only the runtime's own structures, each
// word with the bounds checks a wrong guess could not pass (the goroutine
// named as the thread's must name the thread's m back, its saved stack
// pointer must lie in its stack); signal-safe: no allocation, no lock, no
// call but the table lookups.
#include "go_stacks.h"

#include <string.h>

#include "go_runtime.h"
#include "go_unwind.h"

namespace go_stacks {
namespace {

bool g_learned;  // the offsets below are known: crossings are made
// Byte offsets: the goroutine's m (g.m), the m's current user goroutine
// (m.curg), the goroutine's saved stack pointer (g.sched.sp; the saved pc
// follows it in gobuf).
uint32_t g_m_off, g_curg_off, g_sched_off;
constexpr unsigned kMaxMore = 128;  // frames added to an allocation's stack

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

// How the scheduler stack was entered for the goroutine.
enum Via { kViaSystemstack, kViaMorestack };

// The return address at pc follows a call (e8, rel32) to fn or fn2.
bool called(uint64_t pc, uint64_t fn, uint64_t fn2) {
  // The five bytes lie inside the Go function that holds pc - 1.
  if (!go_unwind::in_go(pc - 5) || go_unwind::start_of(pc - 5) != go_unwind::start_of(pc - 1)) return false;
  const auto* c = reinterpret_cast<const unsigned char*>(pc - 5);
  if (c[0] != 0xe8) return false;
  int32_t rel;
  memcpy(&rel, c + 1, 4);
  const uint64_t to = pc + uint64_t(int64_t(rel));
  return to && (to == fn || to == fn2);
}

int resume(Via via, uint64_t* frames, int n, int max) {
  if (!g_learned || n >= max) return n;
  const uintptr_t g = go_runtime::current_g();
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
  if (via == kViaSystemstack) {
    // systemstack and asmcgocall save a pc inside runtime.systemstack_switch,
    // which stands for them, with their own stack pointer: Go's tables give
    // that frame's size (none before Go 1.21, the frame pointer's since),
    // and its return address is their caller's. The pc itself is no frame.
    if (go_unwind::start_of(pc) != go_unwind::switch_entry(go_unwind::kSystemstackSwitch)) return n;
    return go_unwind::walk(pc, sp, lo, hi, frames, n, max, &at);
  }
  // morestack saves the function that asked for more stack at its call to
  // it, the function's frame not yet made. Anything else there (the
  // scheduler ran another goroutine since: newstack does not return to
  // morestack) is not this stack's.
  if (!called(pc, go_unwind::switch_entry(go_unwind::kMorestack),
              go_unwind::switch_entry(go_unwind::kMorestackNoctxt)))
    return n;
  frames[n++] = pc;
  return go_unwind::walk(pc, sp, lo, hi, frames, n, max, &at);
}

}  // namespace

void learn() {
  const uint64_t entry = go_unwind::switch_entry(go_unwind::kSystemstack);
  // runtime.systemstack's way back, after it called its function on g0:
  //   MOVQ g_m(AX), BX; MOVQ m_curg(BX), AX; (g back into TLS);
  //   MOVQ (g_sched+gobuf_sp)(AX), SP
  // (registers ax 0, bx 3, sp 4). Its code is some 130 bytes.
  constexpr int kRead = 192;
  if (!entry || !go_unwind::in_go(entry + kRead)) return;
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
        g_learned = true;
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
  if (n == first) return n;
  if (at == go_unwind::kSystemstack) return resume(kViaSystemstack, frames, n, max);
  if (at == go_unwind::kMorestack) return resume(kViaMorestack, frames, n, max);
  return n;
}

int after_c(uint64_t ret, uint64_t* frames, int n, int max) {
  const uint64_t entry = go_unwind::switch_entry(go_unwind::kAsmcgocall);
  if (!g_learned || !entry || n >= max || go_unwind::start_of(ret - 1) != entry) return n;
  const int before = n;
  frames[n++] = ret;
  n = resume(kViaSystemstack, frames, n, max);
  // asmcgocall's frame alone: the goroutine was not found; the stack is not
  // whole, and says so by ending there.
  return n > before + 1 ? n : before;
}

unsigned after_c_frame(void** frames, unsigned n, unsigned max) {
  if (n == 0 || n >= max) return n;
  uint64_t more[kMaxMore];
  const uint64_t last = reinterpret_cast<uint64_t>(frames[n - 1]);
  // jemalloc's unwind keeps asmcgocall's frame as the last: the goroutine's
  // frames follow it.
  const int got = after_c(last, more, 0, int(max - n + 1 < kMaxMore ? max - n + 1 : kMaxMore));
  if (got <= 1) return n;
  for (int i = 1; i < got; ++i) frames[n + i - 1] = reinterpret_cast<void*>(more[i]);
  return n + unsigned(got - 1);
}

}  // namespace go_stacks
