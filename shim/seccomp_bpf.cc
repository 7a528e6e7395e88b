// seccomp_bpf: see seccomp_bpf.h. Written here rather than taken from a
// library: libseccomp builds filters but has no evaluator, and the kernel's
// own cannot be called from user space; this is the small subset the kernel
// accepts for seccomp, read from its filter checker.
#include "seccomp_bpf.h"

#include <string.h>

namespace seccomp_bpf {

namespace {
constexpr uint32_t kDataLen = sizeof(struct seccomp_data);

bool load_word(const struct seccomp_data& d, uint32_t off, uint32_t* out) {
  if (off >= kDataLen || off % 4) return false;
  memcpy(out, reinterpret_cast<const char*>(&d) + off, 4);  // host order, as the kernel loads it
  return true;
}

uint32_t alu(uint16_t op, uint32_t a, uint32_t v, bool* bad) {
  switch (op) {
    case BPF_ADD: return a + v;
    case BPF_SUB: return a - v;
    case BPF_MUL: return a * v;
    case BPF_DIV: return v ? a / v : (*bad = true, 0);
    case BPF_MOD: return v ? a % v : (*bad = true, 0);
    case BPF_OR: return a | v;
    case BPF_AND: return a & v;
    case BPF_XOR: return a ^ v;
    case BPF_LSH: return v < 32 ? a << v : 0;
    case BPF_RSH: return v < 32 ? a >> v : 0;
    case BPF_NEG: return 0u - a;
  }
  *bad = true;
  return 0;
}
}  // namespace

uint32_t run(const struct sock_filter* prog, unsigned len, const struct seccomp_data& data) {
  uint32_t A = 0, X = 0, M[BPF_MEMWORDS] = {};
  // Jumps only go forward (unsigned offsets), so this ends within len steps.
  for (unsigned pc = 0; pc < len; ++pc) {
    const struct sock_filter& f = prog[pc];
    const uint32_t k = f.k;
    switch (f.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (!load_word(data, k, &A)) return kInvalid;
        break;
      case BPF_LD | BPF_W | BPF_LEN: A = kDataLen; break;
      case BPF_LDX | BPF_W | BPF_LEN: X = kDataLen; break;
      case BPF_LD | BPF_IMM: A = k; break;
      case BPF_LDX | BPF_IMM: X = k; break;
      case BPF_LD | BPF_MEM:
        if (k >= BPF_MEMWORDS) return kInvalid;
        A = M[k];
        break;
      case BPF_LDX | BPF_MEM:
        if (k >= BPF_MEMWORDS) return kInvalid;
        X = M[k];
        break;
      case BPF_ST:
        if (k >= BPF_MEMWORDS) return kInvalid;
        M[k] = A;
        break;
      case BPF_STX:
        if (k >= BPF_MEMWORDS) return kInvalid;
        M[k] = X;
        break;
      case BPF_MISC | BPF_TAX: X = A; break;
      case BPF_MISC | BPF_TXA: A = X; break;
      case BPF_RET | BPF_K: return k;
      case BPF_RET | BPF_A: return A;
      case BPF_JMP | BPF_JA:
        if (k >= len - pc - 1) return kInvalid;
        pc += k;
        break;
      default:
        if (BPF_CLASS(f.code) == BPF_ALU) {
          bool bad = false;
          A = alu(BPF_OP(f.code), A, BPF_SRC(f.code) == BPF_X ? X : k, &bad);
          // Division by a zero X ends a classic filter with 0: KILL_THREAD.
          if (bad) return BPF_OP(f.code) == BPF_DIV || BPF_OP(f.code) == BPF_MOD ? 0 : kInvalid;
        } else if (BPF_CLASS(f.code) == BPF_JMP) {
          const uint32_t v = BPF_SRC(f.code) == BPF_X ? X : k;
          bool taken;
          switch (BPF_OP(f.code)) {
            case BPF_JEQ: taken = A == v; break;
            case BPF_JGT: taken = A > v; break;
            case BPF_JGE: taken = A >= v; break;
            case BPF_JSET: taken = (A & v) != 0; break;
            default: return kInvalid;
          }
          const unsigned off = taken ? f.jt : f.jf;
          if (off >= len - pc - 1) return kInvalid;
          pc += off;
        } else {
          return kInvalid;
        }
    }
  }
  return kInvalid;  // fell off the end: the kernel refuses such a filter
}

namespace {
// The kernel's check_load_and_stores: a scratch word is read only where
// every path to the read has stored it. Jumps go forward, so one pass.
bool memory_written_before_read(const struct sock_filter* prog, unsigned len) {
  uint16_t masks[BPF_MAXINSNS];
  for (unsigned i = 0; i < len; ++i) masks[i] = 0xffff;
  masks[0] = 0;
  for (unsigned pc = 0; pc < len; ++pc) {
    uint16_t valid = masks[pc];
    const struct sock_filter& f = prog[pc];
    switch (f.code) {
      case BPF_ST:
      case BPF_STX: valid |= uint16_t(1u << f.k); break;
      case BPF_LD | BPF_MEM:
      case BPF_LDX | BPF_MEM:
        if (!(valid & (1u << f.k))) return false;
        break;
    }
    if (f.code == (BPF_JMP | BPF_JA)) {
      masks[pc + 1 + f.k] &= valid;
    } else if (BPF_CLASS(f.code) == BPF_JMP) {
      masks[pc + 1 + f.jt] &= valid;
      masks[pc + 1 + f.jf] &= valid;
    } else if (BPF_CLASS(f.code) != BPF_RET && pc + 1 < len) {
      masks[pc + 1] &= valid;
    }
  }
  return true;
}
}  // namespace

bool valid(const struct sock_filter* prog, unsigned len) {
  if (len == 0 || len > BPF_MAXINSNS) return false;
  for (unsigned pc = 0; pc < len; ++pc) {
    const struct sock_filter& f = prog[pc];
    const unsigned left = len - pc - 1;  // instructions after this one
    switch (f.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (f.k >= kDataLen || f.k % 4) return false;
        break;
      case BPF_LD | BPF_W | BPF_LEN:
      case BPF_LDX | BPF_W | BPF_LEN:
      case BPF_LD | BPF_IMM:
      case BPF_LDX | BPF_IMM:
      case BPF_MISC | BPF_TAX:
      case BPF_MISC | BPF_TXA:
      case BPF_RET | BPF_K:
      case BPF_RET | BPF_A:
        break;
      case BPF_LD | BPF_MEM:
      case BPF_LDX | BPF_MEM:
      case BPF_ST:
      case BPF_STX:
        if (f.k >= BPF_MEMWORDS) return false;
        break;
      case BPF_JMP | BPF_JA:
        if (f.k >= left) return false;
        break;
      default:
        if (BPF_CLASS(f.code) == BPF_ALU) {
          const uint16_t op = BPF_OP(f.code);
          // seccomp's list: no BPF_MOD, and BPF_NEG only on its own.
          if (op != BPF_ADD && op != BPF_SUB && op != BPF_MUL && op != BPF_DIV && op != BPF_OR && op != BPF_AND &&
              op != BPF_XOR && op != BPF_LSH && op != BPF_RSH && op != BPF_NEG)
            return false;
          if (op == BPF_NEG && BPF_SRC(f.code) == BPF_X) return false;
          if (BPF_SRC(f.code) == BPF_K && (op == BPF_DIV || op == BPF_MOD) && f.k == 0) return false;
          if (BPF_SRC(f.code) == BPF_K && (op == BPF_LSH || op == BPF_RSH) && f.k >= 32) return false;
        } else if (BPF_CLASS(f.code) == BPF_JMP) {
          const uint16_t op = BPF_OP(f.code);
          if (op != BPF_JEQ && op != BPF_JGT && op != BPF_JGE && op != BPF_JSET) return false;
          if (f.jt >= left || f.jf >= left) return false;
        } else {
          return false;
        }
    }
  }
  return BPF_CLASS(prog[len - 1].code) == BPF_RET && memory_written_before_read(prog, len);
}

Outcome outcome(uint32_t ret) {
  if (ret == kInvalid) return Outcome::kKills;
  switch (ret & SECCOMP_RET_ACTION_FULL) {
    case SECCOMP_RET_ALLOW:
    case SECCOMP_RET_LOG: return Outcome::kRuns;
    case SECCOMP_RET_ERRNO:
    case SECCOMP_RET_TRACE: return Outcome::kFails;
    default: return Outcome::kKills;
  }
}

}  // namespace seccomp_bpf
