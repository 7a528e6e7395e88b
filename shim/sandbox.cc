// sandbox: see sandbox.h.
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>

#include "errline.h"
#include "image.h"
#include "lifecycle.h"
#include "seccomp_bpf.h"
#include "sys.h"

namespace sandbox {

namespace {
#if defined(__x86_64__)
constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
#error "sandbox: the audit architecture of this target is not known"
#endif

// What a call is needed for: while the program runs (its threads' start and
// end, the sampling signal, the wait hooks), or at a stop (and snapshots).
// or for the shim's own one-shot timers (a fatal stop's watchdog, a deferred
// signal's retry), which the shim can do without.
enum Need : uint8_t { kRun = 1, kStop = 2, kTimer = 4 };

// One of the shim's calls with the arguments a filter might look at (flags,
// the signal's target): the ones the shim passes, as far as they are fixed.
struct Probe {
  const char* name;
  long nr;
  uint8_t need;
  uint64_t a[4];
};

constexpr uint64_t kThreadClone = 0x3d0f00;  // glibc's pthread_create flags
constexpr uint64_t kAnon = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
constexpr uint64_t kRw = PROT_READ | PROT_WRITE;
constexpr uint64_t kCreate = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
constexpr uint64_t kAtCwd = uint64_t(int64_t(AT_FDCWD));

// Filled in at the evaluation: pid and tid (tgkill's target), and this
// thread's CPU clock as the sampler names a thread's (sampler.cc's
// thread_clock: a negative clockid, which Chromium's policy traps where it
// lets CLOCK_THREAD_CPUTIME_ID through).
// A policy may let a thread read its own clock by number and no other's:
// the probes name another thread's too (kOtherClock).
constexpr uint64_t kPid = ~0ull - 1, kTid = ~0ull - 2, kClock = ~0ull - 3, kOtherClock = ~0ull - 4;

#define P(nm, need, ...) {#nm, SYS_##nm, need, {__VA_ARGS__}}
const Probe kProbes[] = {
    // While the program runs.
    P(timer_create, kRun, kClock),
    P(timer_create, kRun, kOtherClock),
    P(timer_settime, kRun, 0, 0),
    P(timer_delete, kRun, 0),
    P(timer_getoverrun, kRun, 0),
    P(sigaltstack, kRun, 0),
    P(mmap, kRun | kStop, 0, 64 << 10, kRw, kAnon),
    P(munmap, kRun | kStop, 0, 64 << 10),
    P(rt_sigprocmask, kRun | kStop, SIG_BLOCK),
    P(rt_sigprocmask, kRun | kStop, SIG_SETMASK),
    P(rt_sigprocmask, kRun | kStop, SIG_UNBLOCK),
    P(rt_sigreturn, kRun),
    P(prctl, kRun, PR_GET_NAME),
    P(clock_gettime, kRun | kStop, kClock),
    P(clock_gettime, kRun | kStop, kOtherClock),
    P(clock_gettime, kRun | kStop, CLOCK_THREAD_CPUTIME_ID),
    P(clock_gettime, kRun | kStop, CLOCK_PROCESS_CPUTIME_ID),
    P(clock_gettime, kRun | kStop, CLOCK_MONOTONIC),
    P(gettid, kRun | kStop, 0),
    P(getpid, kRun | kStop, 0),
    P(futex, kRun | kStop, 0, FUTEX_WAIT_PRIVATE),
    P(futex, kRun | kStop, 0, FUTEX_WAKE_PRIVATE),
    P(tgkill, kRun | kStop, kPid, kTid, SIGTERM),
    P(rt_sigaction, kRun | kStop, SIGTERM),
    P(rt_sigaction, kRun | kStop, SIGSEGV),
    // At a stop.
    P(openat, kStop, kAtCwd, 0, O_RDONLY | O_CLOEXEC),
    P(openat, kStop, kAtCwd, 0, kCreate, 0644),
    P(openat, kStop, kAtCwd, 0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY),
    P(read, kStop, 3),
    P(pread64, kStop, 3),
    P(write, kStop, 2),
    P(write, kStop, 3),
    P(pwrite64, kStop, 3),
    P(lseek, kStop, 3),
    P(close, kStop, 3),
    P(fcntl, kStop, 3, F_DUPFD_CLOEXEC),
    P(fcntl, kStop, 3, F_GETFD),
    P(ftruncate, kStop, 3),
    P(newfstatat, kStop, kAtCwd),
    P(fstat, kStop, 3),
    P(statfs, kStop, 0),
    P(getdents64, kStop, 3),
    P(readlinkat, kStop, kAtCwd),
    P(getcwd, kStop, 0),
    P(memfd_create, kStop, 0, MFD_CLOEXEC),
    P(mprotect, kStop, 0, 4096, kRw),
    P(mprotect, kStop, 0, 4096, PROT_NONE),
    P(madvise, kStop, 0, 4096, MADV_DONTNEED),
    P(brk, kStop, 0),
    P(clone, kStop, kThreadClone),
    P(set_robust_list, kStop, 0),
    P(rseq, kStop, 0),
    P(exit, kStop, 0),
    P(prctl, kStop, PR_SET_NAME),
    P(getrusage, kStop, uint64_t(RUSAGE_SELF)),
    P(sysinfo, kStop, 0),
    P(sched_getaffinity, kStop, 0),
    P(prlimit64, kStop, 0, RLIMIT_FSIZE, 0),
    P(prlimit64, kStop, 0, RLIMIT_AS, 0),
    P(getppid, kStop, 0),
    P(getsid, kStop, 0),
    P(getuid, kStop, 0),
    P(geteuid, kStop, 0),
    P(clock_nanosleep, kStop, CLOCK_MONOTONIC),
    P(rt_sigpending, kStop, 0),
    P(timer_create, kTimer, CLOCK_MONOTONIC),
    P(timer_settime, kTimer, 0, 0),
    P(timer_delete, kTimer, 0),
    P(process_vm_readv, kStop, kPid),
    P(mkdirat, kStop, kAtCwd),
    P(renameat, kStop, kAtCwd, 0, kAtCwd),
    P(unlinkat, kStop, kAtCwd),
    P(faccessat, kStop, kAtCwd),
#ifdef SYS_open  // the calls glibc and libraries still make by their old numbers
    P(open, kStop, 0, O_RDONLY | O_CLOEXEC),
    P(creat, kStop, 0, 0600),
    P(mkdir, kStop, 0),
    P(rename, kStop, 0),
    P(unlink, kStop, 0),
    P(readlink, kStop, 0),
    P(access, kStop, 0),
    P(poll, kStop, 0),
#endif
};
#undef P

std::atomic<bool> g_stop_forbidden{false}, g_run_forbidden{false}, g_timers_forbidden{false};

// The first probe of a need the filter kills, or null.
const Probe* first_killed(const struct sock_fprog& f, uint8_t need) {
  const uint64_t pid = uint64_t(getpid()), tid = uint64_t(sys::gettid());
  // An int argument: its low half.
  const uint64_t clock = uint32_t((~uint32_t(tid) << 3) | 6), other = uint32_t((~uint32_t(tid + 1) << 3) | 6);
  for (const Probe& p : kProbes) {
    if (!(p.need & need)) continue;
    struct seccomp_data d = {};
    d.nr = int(p.nr);
    d.arch = kArch;
    for (int i = 0; i < 4; ++i)
      d.args[i] = p.a[i] == kPid ? pid : p.a[i] == kTid ? tid : p.a[i] == kClock ? clock
                                                               : p.a[i] == kOtherClock ? other : p.a[i];
    if (seccomp_bpf::outcome(seccomp_bpf::run(f.filter, f.len, d)) == seccomp_bpf::Outcome::kKills) return &p;
  }
  return nullptr;
}

void before_filter(const void* prog) {
  if (!lifecycle::profiling() || !prog) return;
  const auto* f = static_cast<const struct sock_fprog*>(prog);
  // What the kernel would refuse (EINVAL) changes nothing.
  if (!f->filter || f->len == 0 || f->len > BPF_MAXINSNS) return;
  // Nor what it would refuse for want of privilege (EACCES): the filter
  // needs no_new_privs or CAP_SYS_ADMIN (taken here as root).
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 && geteuid() != 0) return;
  const Probe* run = g_run_forbidden.load() ? nullptr : first_killed(*f, kRun);
  const Probe* stop = g_stop_forbidden.load() ? nullptr : first_killed(*f, kStop);
  if (!g_timers_forbidden.load() && first_killed(*f, kTimer)) g_timers_forbidden.store(true);
  if (!run && !stop) return;
  image::mark_sandboxed();
  char why[160];
  if (run) {
    g_run_forbidden.store(true);
    snprintf(why, sizeof why, "the program's seccomp filter forbids %s", run->name);
    lifecycle::sandboxed(why, false);
  }
  if (stop) {
    g_stop_forbidden.store(true);
    snprintf(why, sizeof why, "the program's seccomp filter forbids %s", stop->name);
    lifecycle::sandboxed(why, true);
  }
}

void strict_mode() {
  if (!lifecycle::profiling()) return;
  // Only read, write, exit and sigreturn are left: nothing of the shim's.
  g_timers_forbidden.store(true);
  image::mark_sandboxed();
  const bool run = !g_run_forbidden.exchange(true), stop = !g_stop_forbidden.exchange(true);
  if (run) lifecycle::sandboxed("the program entered seccomp's strict mode", false);
  if (stop) lifecycle::sandboxed("the program entered seccomp's strict mode", true);
}
}  // namespace

namespace {
__thread int t_own_calls;
std::atomic<bool> g_trap_said{false};
}  // namespace

OwnCalls::OwnCalls() { ++t_own_calls; }
OwnCalls::~OwnCalls() { --t_own_calls; }

bool absorb_trap(int sig, const siginfo_t* si, void* uc) {
  constexpr int kSysSeccomp = 1;  // si_code of a seccomp trap (asm-generic/siginfo.h's SYS_SECCOMP)
  if (sig != SIGSYS || !si || si->si_code != kSysSeccomp || t_own_calls <= 0 || !uc) return false;
#if defined(__x86_64__)
  static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
#elif defined(__aarch64__)
  static_cast<ucontext_t*>(uc)->uc_mcontext.regs[0] = uint64_t(-ENOSYS);
#endif
  g_run_forbidden.store(true);
  const int saved = errno;
  if (!g_trap_said.exchange(true)) {
    // Spelt out by hand: snprintf is not for a signal handler.
    static const char kHead[] = "a seccomp filter the shim did not see go in traps system call ";
    static const char kTail[] = ": threads started from here on are not sampled";
    char line[sizeof kHead + 12 + sizeof kTail], digits[12];
    int nd = 0;
    for (unsigned v = unsigned(si->si_syscall); nd == 0 || v; v /= 10) digits[nd++] = char('0' + v % 10);
    size_t n = sizeof kHead - 1;
    memcpy(line, kHead, n);
    while (nd) line[n++] = digits[--nd];
    memcpy(line + n, kTail, sizeof kTail);
    errline::line(line);
  }
  errno = saved;
  return true;
}

void before_seccomp_call(unsigned op, const void* prog) {
  if (op == SECCOMP_SET_MODE_FILTER) before_filter(prog);
  if (op == SECCOMP_SET_MODE_STRICT) strict_mode();
}

void before_prctl_seccomp(unsigned long mode, const void* prog) {
  if (mode == SECCOMP_MODE_FILTER) before_filter(prog);
  if (mode == SECCOMP_MODE_STRICT) strict_mode();
}

bool stop_forbidden() { return g_stop_forbidden.load(std::memory_order_relaxed); }
bool running_forbidden() { return g_run_forbidden.load(std::memory_order_relaxed); }
bool timers_forbidden() { return g_timers_forbidden.load(std::memory_order_relaxed); }

}  // namespace sandbox
