// seccomp_bpf_test: the shim's reading of a filter agrees with the kernel's.
// Each filter is put in force in a forked child, which then makes the call;
// how the child ends (returned, failed, killed by SIGSYS) is the kernel's
// verdict, and seccomp_bpf::outcome(run(...)) must say the same.
#include <errno.h>
#include <linux/audit.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "check.h"
#include "seccomp_bpf.h"

namespace {
using seccomp_bpf::Outcome;
using Prog = std::vector<struct sock_filter>;

#if defined(__aarch64__)
constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#endif
constexpr uint32_t kNr = offsetof(struct seccomp_data, nr), kArchOff = offsetof(struct seccomp_data, arch);
constexpr uint32_t arg_lo(int i) { return uint32_t(offsetof(struct seccomp_data, args) + 8 * i); }

sock_filter stmt(uint16_t code, uint32_t k) { return BPF_STMT(code, k); }
sock_filter jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { return BPF_JUMP(code, k, jt, jf); }

// The kernel's verdict: the call made in a child under the filter.
Outcome kernel(const Prog& p, long nr, long a0, long a1) {
  pid_t pid = fork();
  if (pid == 0) {
    struct sock_fprog f = {uint16_t(p.size()), const_cast<sock_filter*>(p.data())};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f)) _exit(9);
    long r = syscall(nr, a0, a1, 0, 0, 0, 0);
    _exit(r == -1 ? 1 : 0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) return Outcome::kKills;
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 9);
  return WIFEXITED(st) && WEXITSTATUS(st) == 1 ? Outcome::kFails : Outcome::kRuns;
}

Outcome ours(const Prog& p, long nr, long a0, long a1) {
  struct seccomp_data d = {};
  d.nr = int(nr);
  d.arch = kArch;
  d.args[0] = uint64_t(a0);
  d.args[1] = uint64_t(a1);
  return seccomp_bpf::outcome(seccomp_bpf::run(p.data(), unsigned(p.size()), d));
}

void agree(const Prog& p, long nr, long a0, long a1) {
  Outcome k = kernel(p, nr, a0, a1), o = ours(p, nr, a0, a1);
  if (k != o) fprintf(stderr, "  nr %ld args %ld %ld: kernel %d, ours %d\n", nr, a0, a1, int(k), int(o));
  CHECK(k == o);
}
}  // namespace

TEST(a_number_and_the_architecture) {
  Prog p = {stmt(BPF_LD | BPF_W | BPF_ABS, kArchOff), jump(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
            stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS), stmt(BPF_LD | BPF_W | BPF_ABS, kNr),
            jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1), stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
            stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  agree(p, SYS_getppid, 0, 0);
  agree(p, SYS_getuid, 0, 0);
}

TEST(arguments_bits_and_words) {
  // arg0 & 4: EPERM; arg1's high word 1: SIGSYS (trap); else allowed.
  Prog p = {stmt(BPF_LD | BPF_W | BPF_ABS, arg_lo(0)), jump(BPF_JMP | BPF_JSET | BPF_K, 4, 0, 1),
            stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM), stmt(BPF_LD | BPF_W | BPF_ABS, arg_lo(1) + 4),
            jump(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 1), stmt(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
            stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  for (long a0 : {0L, 4L, 7L, 8L})
    for (long a1 : {0L, 1L, 1L << 32, (1L << 32) | 5})
      agree(p, SYS_getppid, a0, a1);
}

TEST(arithmetic_scratch_memory_and_x) {
  // ((nr & 0xff) + 1) * 2 through M[3] and X; compared with X and K.
  // exit_group is let through first: the child's exit carries the kernel's
  // verdict, and glibc 2.41's _exit, when exit_group fails, no longer falls
  // back to exit but faults (the arithmetic alone would refuse exit_group).
  Prog p = {stmt(BPF_LD | BPF_W | BPF_ABS, kNr),      jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit_group, 9, 0),
            stmt(BPF_ALU | BPF_AND | BPF_K, 0xff),
            stmt(BPF_ALU | BPF_ADD | BPF_K, 1),       stmt(BPF_ALU | BPF_MUL | BPF_K, 2),
            stmt(BPF_ST, 3),                          stmt(BPF_LDX | BPF_MEM, 3),
            stmt(BPF_LD | BPF_W | BPF_ABS, arg_lo(0)), jump(BPF_JMP | BPF_JEQ | BPF_X, 0, 2, 0),
            stmt(BPF_MISC | BPF_TXA, 0),              jump(BPF_JMP | BPF_JGE | BPF_K, 2 * (SYS_getuid + 1), 1, 0),
            stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES)};
  for (long nr : {long(SYS_getppid), long(SYS_getuid), long(SYS_getpid)})
    for (long a0 : {0L, 2L * (SYS_getppid + 1), 2L * (SYS_getpid + 1)}) agree(p, nr, a0, 0);
}

TEST(a_return_of_the_accumulator_and_a_jump_always) {
  // getppid: EPERM by way of a jump and A; anything else (exit too) runs.
  Prog p = {stmt(BPF_LD | BPF_W | BPF_ABS, kNr), jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
            stmt(BPF_JMP | BPF_JA, 1), stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            stmt(BPF_LD | BPF_IMM, SECCOMP_RET_ERRNO | 5), stmt(BPF_RET | BPF_A, 0)};
  agree(p, SYS_getppid, 0, 0);
  agree(p, SYS_getuid, 0, 0);
}

TEST(what_the_kernel_would_refuse_is_not_allowed) {
  struct seccomp_data d = {};
  Prog off_the_end = {stmt(BPF_LD | BPF_W | BPF_ABS, kNr)};
  CHECK(seccomp_bpf::run(off_the_end.data(), 1, d) == seccomp_bpf::kInvalid);
  Prog outside = {stmt(BPF_LD | BPF_W | BPF_ABS, 64), stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  CHECK(seccomp_bpf::run(outside.data(), 2, d) == seccomp_bpf::kInvalid);
  Prog far = {jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 5, 0), stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  CHECK(seccomp_bpf::outcome(seccomp_bpf::run(far.data(), 2, d)) == Outcome::kKills);
  // An offset whose end wraps around 32 bits: outside, not a read far away.
  Prog wraps = {stmt(BPF_LD | BPF_W | BPF_ABS, 0xfffffffc), stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  CHECK(seccomp_bpf::run(wraps.data(), 2, d) == seccomp_bpf::kInvalid);
  CHECK(!seccomp_bpf::valid(wraps.data(), 2) && !seccomp_bpf::valid(off_the_end.data(), 1) &&
        !seccomp_bpf::valid(outside.data(), 2) && !seccomp_bpf::valid(far.data(), 2));
  Prog shift = {stmt(BPF_ALU | BPF_LSH | BPF_K, 32), stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  Prog div0 = {stmt(BPF_ALU | BPF_DIV | BPF_K, 0), stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  CHECK(!seccomp_bpf::valid(shift.data(), 2) && !seccomp_bpf::valid(div0.data(), 2));
  // seccomp's own refusals: BPF_MOD, BPF_NEG with X, a scratch word read
  // before any path stored it. Each checked against the kernel too.
  Prog mod = {stmt(BPF_ALU | BPF_MOD | BPF_K, 3), stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  Prog negx = {stmt(BPF_ALU | BPF_NEG | BPF_X, 0), stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  Prog unset = {stmt(BPF_LD | BPF_MEM, 2), stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  Prog half = {stmt(BPF_LD | BPF_W | BPF_ABS, kNr), jump(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 1), stmt(BPF_ST, 2),
               stmt(BPF_LD | BPF_MEM, 2), stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  for (const Prog* p : {&mod, &negx, &unset, &half}) {
    CHECK(!seccomp_bpf::valid(p->data(), unsigned(p->size())));
    struct sock_fprog f = {uint16_t(p->size()), const_cast<sock_filter*>(p->data())};
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
      _exit(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f) == -1 && errno == EINVAL ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);  // the kernel refuses it as well
  }
}

TEST(what_the_kernel_takes_is_valid) {
  // Each filter the kernel took in the tests above.
  Prog p = {stmt(BPF_LD | BPF_W | BPF_ABS, kNr), jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
            stmt(BPF_JMP | BPF_JA, 1), stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            stmt(BPF_LD | BPF_IMM, SECCOMP_RET_ERRNO | 5), stmt(BPF_RET | BPF_A, 0)};
  CHECK(seccomp_bpf::valid(p.data(), unsigned(p.size())));
  CHECK(kernel(p, SYS_getuid, 0, 0) == Outcome::kRuns);
}


