// sys: raw syscalls and the stderr channel; see sys.h.
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>

#include "fsroot.h"

namespace sys {

namespace {
// process_vm_readv/writev on this process: n on success; a short count is
// the kernel's EFAULT for the part not mapped.
bool copy_own(long nr, const void* from, void* to, size_t n, bool reading) {
  struct iovec local = {reading ? to : const_cast<void*>(from), n};
  struct iovec remote = {reading ? const_cast<void*>(from) : to, n};
  long r = syscall(nr, syscall(SYS_getpid), &local, 1, &remote, 1, 0);
  if (r == long(n)) return true;
  if (r >= 0) errno = EFAULT;
  return false;
}
}  // namespace

char* put_uint(char* out, unsigned long v) {
  char digits[20];
  int n = 0;
  do digits[n++] = char('0' + v % 10); while (v /= 10);
  while (n) *out++ = digits[--n];
  return out;
}

bool read_own(const void* src, void* dst, size_t n) {
  const int saved = errno;
  const bool ok = copy_own(SYS_process_vm_readv, src, dst, n, true);
  if (ok) errno = saved;
  return ok;
}

bool write_own(void* dst, const void* src, size_t n) {
  const int saved = errno;
  const bool ok = copy_own(SYS_process_vm_writev, src, dst, n, false);
  if (ok) errno = saved;
  return ok;
}
pid_t gettid() { return pid_t(syscall(SYS_gettid)); }

bool memory_limited() {
  struct rlimit r;
  for (int which : {RLIMIT_AS, RLIMIT_DATA})
    if (syscall(SYS_prlimit64, 0, which, nullptr, &r) == 0 && r.rlim_cur != RLIM_INFINITY) return true;
  return false;
}

namespace {
std::atomic<bool> g_advice_forbidden{false};
}  // namespace

void forbid_advice() { g_advice_forbidden.store(true); }
bool advice_forbidden() { return g_advice_forbidden.load(std::memory_order_relaxed); }

bool advise(void* p, size_t bytes, int advice) {
  if (advice_forbidden()) return false;
  const int saved = errno;
  const bool ok = syscall(SYS_madvise, p, bytes, advice) == 0;
  errno = saved;
  return ok;
}

void dont_dump(void* p, size_t bytes) {
  if (p) advise(p, bytes, MADV_DONTDUMP);
}

void* map_own(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  dont_dump(p, bytes);
  return p;
}

bool wipe_on_fork(void* p, size_t bytes) {
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif
  if (advice_forbidden()) return false;  // a fork child maps fresh tables instead
  const int saved = errno;
  // An emulator may take any advice and do nothing (qemu-user before 8.1
  // returns 0 for all of it): advice no kernel knows must be refused first,
  // or the children would count on a wipe that never comes.
  const bool ok = p && syscall(SYS_madvise, p, bytes, -1) != 0 && syscall(SYS_madvise, p, bytes, MADV_WIPEONFORK) == 0;
  errno = saved;
  return ok;
}

bool stat_field(pid_t pid, int n, char* out, size_t cap) {
  char path[48] = "/proc/self/stat";
  if (pid > 0) {
    char* p = put_uint(path + 6, unsigned(pid));  // after "/proc/"
    memcpy(p, "/stat", 6);
  }
  char buf[1024];
  int fd = fsroot::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  long got = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  if (got <= 0) return false;
  buf[got] = 0;
  const char* p = strrchr(buf, ')');  // the name before it may hold anything
  if (!p) return false;
  for (int field = 2; field < n && *p; ++p)
    if (*p == ' ') ++field;
  size_t len = 0;
  while (p[len] && p[len] != ' ' && p[len] != '\n') ++len;
  if (len == 0 || len >= cap) return false;
  memcpy(out, p, len);
  out[len] = 0;
  return true;
}

bool single_threaded() {
  char threads[24];  // num_threads, the 20th field
  return stat_field(0, 20, threads, sizeof threads) && strcmp(threads, "1") == 0;
}

uint64_t now_ns(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool fsize_limited() {
  struct rlimit rl;
  return getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
}

size_t fsize_room(int fd) {
  struct rlimit rl;
  struct stat st;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return SIZE_MAX;  // the limit is for regular files
  int flags = fcntl(fd, F_GETFL);
  off_t at = flags >= 0 && (flags & O_APPEND) ? st.st_size : lseek(fd, 0, SEEK_CUR);
  if (at < 0) return SIZE_MAX;
  return uint64_t(at) >= rl.rlim_cur ? 0 : size_t(rl.rlim_cur - uint64_t(at));
}

bool write_all(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  size_t room = fsize_room(fd);
  while (n > 0) {
    if (room == 0) {
      errno = EFBIG;
      return false;
    }
    ssize_t w = syscall(SYS_write, fd, p, n < room ? n : room);  // not through an interposed write
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
    if (room != SIZE_MAX) room -= size_t(w);
  }
  return true;
}

int top_free_fd() {
  struct rlimit rl;
  int lim = 1024;
  if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < (1u << 20))
    lim = int(rl.rlim_cur);
  for (int fd = lim - 1; fd > lim - 64 && fd > 2; --fd)
    if (syscall(SYS_fcntl, fd, F_GETFD) < 0 && errno == EBADF) return fd;
  return lim / 2 > 2 ? lim / 2 : 3;
}

void exit_group(int status) {
  for (;;) {
#if defined(__x86_64__)
    long nr = SYS_exit_group;
    __asm__ volatile("syscall" : "+a"(nr) : "D"(long(status)) : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_exit_group;
    register long x0 __asm__("x0") = status;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8) : "memory");
#endif
  }
}

namespace {
struct rlimit g_room_saved;
std::atomic<bool> g_room_raised{false};
}  // namespace

DescriptorRoom::DescriptorRoom(bool allowed) {
  struct rlimit saved;
  if (!allowed || syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, &saved) != 0 || saved.rlim_cur >= saved.rlim_max ||
      saved.rlim_cur > (1u << 30))
    return;
  // A program's numbers fill from the bottom: the top taken, all are.
  long probe = -1;
  for (int from : {2, 1, 0})
    if ((probe = syscall(SYS_fcntl, from, F_DUPFD_CLOEXEC, saved.rlim_cur > 19 ? long(saved.rlim_cur) - 16 : 3)) >= 0 ||
        errno != EBADF)
      break;
  if (probe >= 0) {
    syscall(SYS_close, probe);
    return;
  }
  if (errno != EMFILE) return;
  struct rlimit more = saved;
  more.rlim_cur = saved.rlim_max - saved.rlim_cur < 64 ? saved.rlim_max : saved.rlim_cur + 64;
  g_room_saved = saved;
  if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &more, nullptr) == 0) g_room_raised.store(true);
}

void DescriptorRoom::give_back() {
  if (g_room_raised.exchange(false)) syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &g_room_saved, nullptr);
}

std::string read_file(const char* path) {
  std::string out, buf(65536, '\0');
  int fd = fsroot::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  for (ssize_t r; (r = read(fd, &buf[0], buf.size())) > 0;) out.append(buf.data(), size_t(r));
  close(fd);
  return out;
}

std::string proc_thread_self(const char* leaf) {
  static std::atomic<int> which{0};  // 0 unknown, 1 thread-self, 2 self
  int w = which.load(std::memory_order_relaxed);
  if (w == 0) {
    char a[4096], b[4096];
    ssize_t na = fsroot::readlink("/proc/thread-self/exe", a, sizeof a);
    ssize_t nb = fsroot::readlink("/proc/self/exe", b, sizeof b);
    w = na > 0 && nb > 0 && (na != nb || memcmp(a, b, size_t(na)) != 0) ? 2 : 1;
    which.store(w, std::memory_order_relaxed);
  }
  return std::string(w == 2 ? "/proc/self/" : "/proc/thread-self/") + leaf;
}

void futex_wait(volatile uint32_t* word, uint32_t expect, uint64_t timeout_ns) {
  struct timespec ts = {time_t(timeout_ns / 1000000000ull), long(timeout_ns % 1000000000ull)};
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expect, &ts, nullptr, 0);
}

void futex_wake(volatile uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, nullptr, nullptr, 0);
}

}  // namespace sys
