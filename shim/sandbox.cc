// sandbox: see sandbox.h.
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>

#include "alloc_choice.h"
#include "arch.h"
#include "errline.h"
#include "heap.h"
#include "image.h"
#include "lifecycle.h"
#include "seccomp_bpf.h"
#include "signals.h"
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
// kSignals: what any handler of the shim's needs to run at all (its return,
// the fatal stand-ins' re-raise); forbidden, the shim's handlers step aside
// (signals::step_aside) and the kernel's defaults are the program's again.
// kMust: a call that must run, not merely fail: rt_sigreturn answered with
// an error returns into whatever follows the restorer, a thread's exit
// loops on it, a futex wait spins; getpid answered -1 cannot tell a vfork
// child from its parent, nor name the pid a signal goes to.
// kHandOver: a fork child's hand-over (forks.h); forbidden, children write
// their own files and the stop goes on.
// kAdvice: madvise, with each advice the shim and its jemalloc give;
// forbidden, jemalloc keeps what is freed (heap.h, keep_freed) and no
// madvise is made again (sys::advise).
enum Need : uint8_t { kRun = 1, kStop = 2, kTimer = 4, kSignals = 8, kMust = 16, kHandOver = 32, kAdvice = 64 };

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
// A policy may let a process signal itself and no other (Chromium's
// RestrictKillTarget): the hand-over's kill names its owner (kOtherPid).
constexpr uint64_t kPid = ~0ull - 1, kTid = ~0ull - 2, kClock = ~0ull - 3, kOtherClock = ~0ull - 4,
                   kOtherPid = ~0ull - 5;

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
    P(rt_sigreturn, kRun | kStop | kSignals | kMust),
    P(rt_tgsigqueueinfo, kSignals, kPid, kTid, SIGTERM),
    P(getpid, kSignals | kMust, 0),
    P(gettid, kSignals, 0),
    P(tgkill, kSignals, kPid, kTid, SIGTERM),
    P(rt_sigaction, kSignals, SIGTERM),
    P(rt_sigprocmask, kSignals, SIG_SETMASK),
    P(prctl, kRun, PR_GET_NAME),
    P(clock_gettime, kRun | kStop, kClock),
    P(clock_gettime, kRun | kStop, kOtherClock),
    P(clock_gettime, kRun | kStop, CLOCK_THREAD_CPUTIME_ID),
    P(clock_gettime, kRun | kStop, CLOCK_PROCESS_CPUTIME_ID),
    P(clock_gettime, kRun | kStop, CLOCK_MONOTONIC),
    P(gettid, kRun | kStop, 0),
    P(getpid, kRun | kStop | kMust, 0),
    P(futex, kRun | kStop | kMust, 0, FUTEX_WAIT_PRIVATE),
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
    P(exit, kStop | kMust, 0),
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
    // A fork child's hand-over (forks.h): the area made and mapped shared,
    // its owner looked for, the blob written through a descriptor of its own.
    P(mmap, kHandOver, 0, 64 << 10, kRw, MAP_SHARED),
    P(kill, kHandOver, kOtherPid, 0),
    P(openat, kHandOver, kAtCwd, 0, O_WRONLY | O_CLOEXEC | O_NOFOLLOW),
    P(pwrite64, kHandOver, 0, 0, 0, 0),
    P(ftruncate, kHandOver, 0, 0),
    P(fallocate, kHandOver, 0, 0),
    P(faccessat, kStop, kAtCwd),
    // Advice: jemalloc's purges (DONTNEED, FREE), the shim's memory kept
    // out of cores, its tables wiped in fork children (and the unknown
    // advice that tells an emulator's answer apart), jemalloc's huge pages
    // (opt.thp).
    P(madvise, kAdvice, 0, 4096, MADV_DONTNEED),
    P(madvise, kAdvice, 0, 4096, MADV_FREE),
    P(madvise, kAdvice, 0, 4096, MADV_DONTDUMP),
    P(madvise, kAdvice, 0, 4096, MADV_WIPEONFORK),
    P(madvise, kAdvice, 0, 4096, ~0ull),
    P(madvise, kAdvice, 0, 4096, MADV_HUGEPAGE),
    P(madvise, kAdvice, 0, 4096, MADV_NOHUGEPAGE),
#ifdef SYS_open  // the calls glibc and libraries still make by their old numbers
    P(open, kStop, 0, O_RDONLY | O_CLOEXEC),
    P(creat, kStop, 0, 0600),
    P(mkdir, kStop, 0),
    P(rename, kStop, 0),
    P(unlink, kStop, 0),
    P(readlink, kStop, 0),
    P(access, kStop, 0),
    P(poll, kStop, 0),
#else  // aarch64: errline's wait for room
    P(ppoll, kStop, 0),
#endif
};
#undef P

std::atomic<bool> g_stop_forbidden{false}, g_run_forbidden{false}, g_timers_forbidden{false},
    g_signals_forbidden{false}, g_hand_over_forbidden{false}, g_getpid_forbidden{false},
    g_filter_seen{false};

// A filter about to go in, and what its probes' placeholders stand for
// (read once, for all of them).
struct Judged {
  const struct sock_fprog& f;
  uint64_t pid, tid, clock, other;
  explicit Judged(const struct sock_fprog& prog)
      : f(prog), pid(uint64_t(getpid())), tid(uint64_t(sys::gettid())),
        // An int argument: its low half.
        clock(uint32_t((~uint32_t(tid) << 3) | 6)), other(uint32_t((~uint32_t(tid + 1) << 3) | 6)) {}
};

// Whether the filter kills this probe (or, for a call that must run, does
// anything but let it run).
bool killed(const Judged& j, const Probe& p) {
  struct seccomp_data d = {};
  d.nr = int(p.nr);
  d.arch = kArch;
  for (int i = 0; i < 4; ++i)
    d.args[i] = p.a[i] == kPid ? j.pid : p.a[i] == kOtherPid ? j.pid + 1 : p.a[i] == kTid ? j.tid
                : p.a[i] == kClock ? j.clock : p.a[i] == kOtherClock ? j.other : p.a[i];
  const seccomp_bpf::Outcome o = seccomp_bpf::outcome(seccomp_bpf::run(j.f.filter, j.f.len, d));
  return o == seccomp_bpf::Outcome::kKills || ((p.need & kMust) && o != seccomp_bpf::Outcome::kRuns);
}

// The first probe of a need the filter kills, or null.
const Probe* first_killed(const Judged& f, uint8_t need) {
  for (const Probe& p : kProbes)
    if ((p.need & need) && killed(f, p)) return &p;
  return nullptr;
}

// Whether the filter kills one of the probes of this call.
bool kills(const Judged& f, long nr) {
  for (const Probe& p : kProbes)
    if (p.nr == nr && killed(f, p)) return true;
  return false;
}

// What the filter forbids, given up now, while every call is allowed.
void act_on(const Judged& f) {
  const Probe* sigs = g_signals_forbidden.load() ? nullptr : first_killed(f, kSignals);
  const Probe* run = g_run_forbidden.load() ? nullptr : first_killed(f, kRun);
  const Probe* stop = g_stop_forbidden.load() ? nullptr : first_killed(f, kStop);
  if (!g_timers_forbidden.load() && first_killed(f, kTimer)) g_timers_forbidden.store(true);
  if (!g_hand_over_forbidden.load() && first_killed(f, kHandOver)) g_hand_over_forbidden.store(true);
  // Running and the stop both need getpid, so both are given up (below, or
  // by an earlier filter); from then the vfork test (lifecycle.cc) must not
  // ask it again. After the lines: they ask it.
  const bool getpid_killed = kills(f, SYS_getpid);
  if (!sigs && !run && !stop) {
    if (getpid_killed) g_getpid_forbidden.store(true);
    return;
  }
  image::mark_sandboxed();
  char why[160];
  if (run || sigs) {
    g_run_forbidden.store(true);
    snprintf(why, sizeof why, "the program's seccomp filter forbids %s", (run ? run : sigs)->name);
    lifecycle::sandboxed(why, false);
  }
  if (stop) {
    g_stop_forbidden.store(true);
    snprintf(why, sizeof why, "the program's seccomp filter forbids %s", stop->name);
    lifecycle::sandboxed(why, true);
  }
  if (getpid_killed) g_getpid_forbidden.store(true);
  if (sigs) {
    // Last: the steps above may still take the shim's signals.
    g_signals_forbidden.store(true);
    g_timers_forbidden.store(true);
    signals::step_aside();
  }
}

// The filter as the kernel will read it, copied without touching memory
// that may not be there (a bad pointer is the kernel's EFAULT, not a fault
// of the shim's); false if it cannot be read, or the copy is refused (an
// earlier filter's): then it is not judged.
bool copy_filter(const void* prog, struct sock_fprog* f, struct sock_filter** insns) {
  OwnCalls own;
  if (!sys::read_own(prog, f, sizeof *f) || !f->filter || f->len == 0 || f->len > BPF_MAXINSNS) return false;
  *insns = static_cast<struct sock_filter*>(malloc(f->len * sizeof(struct sock_filter)));
  if (*insns && sys::read_own(f->filter, *insns, f->len * sizeof(struct sock_filter))) return true;
  free(*insns);
  return false;
}

// Whether the kernel will take a filter from this process: no_new_privs,
// or CAP_SYS_ADMIN in the effective set (root in a container often lacks it).
bool may_install() {
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1) return true;
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2] = {};
  return syscall(SYS_capget, &h, d) == 0 && (d[CAP_SYS_ADMIN / 32].effective >> (CAP_SYS_ADMIN % 32)) & 1;
}

// What the filter forbids of madvise, whether the shim profiles or not:
// jemalloc may serve an image whose setup failed.
void act_on_advice(const Judged& f) {
  if (sys::advice_forbidden() || !first_killed(f, kAdvice)) return;
  heap::keep_freed();
  sys::forbid_advice();
}

void before_filter(unsigned flags, const void* prog) {
  // A vfork child shares the parent's memory: what it gives up would be the
  // parent's too.
  const bool profiling = lifecycle::profiling();
  if ((!profiling && !alloc_choice::jemalloc()) || !prog || lifecycle::in_vfork_child()) return;
  // What the kernel would refuse (EINVAL, EACCES) changes nothing.
  constexpr unsigned kKnownFlags = 0x3f;  // TSYNC .. WAIT_KILLABLE_RECV
  if (flags & ~kKnownFlags) return;
  struct sock_fprog f;
  struct sock_filter* insns = nullptr;
  if (!copy_filter(prog, &f, &insns)) return;
  f.filter = insns;
  if (seccomp_bpf::valid(f.filter, f.len) && may_install()) {
    g_filter_seen.store(true);
    const Judged judged(f);
    act_on_advice(judged);
    if (profiling) act_on(judged);
  }
  free(insns);
}

void strict_mode() {
  // Only read, write, exit and sigreturn are left: nothing of the shim's.
  if (lifecycle::in_vfork_child()) return;
  if (!sys::advice_forbidden()) {
    heap::keep_freed();
    sys::forbid_advice();
  }
  if (!lifecycle::profiling()) return;
  g_timers_forbidden.store(true);
  g_hand_over_forbidden.store(true);
  image::mark_sandboxed();
  const bool run = !g_run_forbidden.exchange(true), stop = !g_stop_forbidden.exchange(true);
  if (run) lifecycle::sandboxed("the program entered seccomp's strict mode", false);
  if (stop) lifecycle::sandboxed("the program entered seccomp's strict mode", true);
  g_getpid_forbidden.store(true);
  if (!g_signals_forbidden.exchange(true)) signals::step_aside();
}
}  // namespace

namespace {
__thread int t_own_calls;
std::atomic<int> g_trapped_nr{0};
std::atomic<bool> g_trap_said{false};
}  // namespace

OwnCalls::OwnCalls() { ++t_own_calls; }
OwnCalls::~OwnCalls() { --t_own_calls; }

bool absorb_trap(int sig, const siginfo_t* si, void* uc) {
  constexpr int kSysSeccomp = 1;  // si_code of a seccomp trap (asm-generic/siginfo.h's SYS_SECCOMP)
  if (sig != SIGSYS || !si || si->si_code != kSysSeccomp || t_own_calls <= 0 || !uc) return false;
  arch::set_syscall_result(uc, -ENOSYS);
  g_run_forbidden.store(true);
  // No call here: this runs with SIGSYS blocked, and a trapped one would
  // kill the process. The line comes from the next thread's start or the
  // stop (say_trapped).
  int none = 0;
  g_trapped_nr.compare_exchange_strong(none, si->si_syscall ? si->si_syscall : -1);
  return true;
}

void say_trapped() {
  const int nr = g_trapped_nr.load(std::memory_order_relaxed);
  if (nr == 0 || g_trap_said.exchange(true)) return;
  char line[160];
  snprintf(line, sizeof line,
           "a seccomp filter the shim did not see go in traps system call %d: threads started from here on "
           "are not sampled",
           nr);
  errline::line(line);
}

void before_seccomp_call(unsigned op, unsigned flags, const void* prog) {
  if (op == SECCOMP_SET_MODE_FILTER) before_filter(flags, prog);
  if (op == SECCOMP_SET_MODE_STRICT) strict_mode();
}

void before_prctl_seccomp(unsigned long mode, const void* prog) {
  if (mode == SECCOMP_MODE_FILTER) before_filter(0, prog);
  if (mode == SECCOMP_MODE_STRICT) strict_mode();
}

bool stop_forbidden() { return g_stop_forbidden.load(std::memory_order_relaxed); }
bool running_forbidden() { return g_run_forbidden.load(std::memory_order_relaxed); }
bool timers_forbidden() { return g_timers_forbidden.load(std::memory_order_relaxed); }
bool hand_over_forbidden() { return g_hand_over_forbidden.load(std::memory_order_relaxed); }
bool getpid_forbidden() { return g_getpid_forbidden.load(std::memory_order_relaxed); }
bool signals_forbidden() { return g_signals_forbidden.load(std::memory_order_relaxed); }
bool filter_seen() { return g_filter_seen.load(std::memory_order_relaxed); }

}  // namespace sandbox
