// hooks_wait: the blocking calls the wait profile times (waits.h). Each is
// the original, called once with the program's arguments; when the profile
// is on it is timed, and a sampled event is recorded after the call
// returns, on the waiting thread. errno, the return value, cancellation
// (the original is the cancellation point; our frames carry unwind tables
// and hold nothing to clean up) and EINTR are the original's: nothing is
// retried, nothing signalled. Off, each costs one predictable branch.
//
// A mutex that is free is locked untimed; a held one, or an rwlock, is
// tried first (the trylock calls): only a lock that waits is timed.
// Semaphores are not tried (sem_wait acts on a pending cancellation even
// when it need not wait; sem_trywait does not).
//
// The wrappers sit in a section of their own (profshim_wait): a stack that
// passes through two of them is a nested call, left to the outer one.
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "errline.h"
#include "export.h"
#include "real.h"
#include "sigmask.h"
#include "waits.h"

// The original, timed when the profile is on; `call` names it in the profile.
#define TIMED(call, expr)                                                               \
  do {                                                                                  \
    errline::before_wait();                                                             \
    if (__builtin_expect(!waits::on(), 1)) return expr;                                 \
    uint64_t t0_ = waits::now();                                                        \
    auto rc_ = expr;                                                                    \
    uint64_t d_;                                                                        \
    if (waits::sampled(t0_, &d_)) waits::record(call, d_, __builtin_return_address(0)); \
    return rc_;                                                                         \
  } while (0)

// --- locks, condition variables, semaphores, threads --------------------------

namespace {
// Whether the mutex is free right now: glibc's lock word (struct
// __pthread_mutex_s, part of its ABI) is 0 when no thread owns it, for
// every kind of mutex. A free one is locked untimed, as inert: an
// uncontended loop costs one load more (a trylock first cost 3 ns a pair,
// 1.6x). A lock that is taken in between is a wait not timed; one freed in
// between is timed, and weighs what it took: the estimate stays fair.
inline bool looks_free(pthread_mutex_t* m) { return __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) == 0; }
}  // namespace

EXPORT_WAIT_WRAPPER int pthread_mutex_lock(pthread_mutex_t* m) noexcept {
  if (__builtin_expect(!waits::on(), 1) || looks_free(m)) return real::pthread_mutex_lock()(m);
  int r = pthread_mutex_trylock(m);  // libc's: not interposed
  if (r != EBUSY) return r;
  TIMED(waits::kMutexLock, real::pthread_mutex_lock()(m));
}

EXPORT_WAIT_WRAPPER int pthread_mutex_timedlock(pthread_mutex_t* m, const struct timespec* abstime) noexcept {
  if (__builtin_expect(!waits::on(), 1) || looks_free(m)) return real::pthread_mutex_timedlock()(m, abstime);
  int r = pthread_mutex_trylock(m);
  if (r != EBUSY) return r;
  TIMED(waits::kMutexTimedlock, real::pthread_mutex_timedlock()(m, abstime));
}

EXPORT_WAIT_WRAPPER int pthread_rwlock_rdlock(pthread_rwlock_t* l) noexcept {
  if (__builtin_expect(!waits::on(), 1)) return real::pthread_rwlock_rdlock()(l);
  int r = pthread_rwlock_tryrdlock(l);
  if (r != EBUSY) return r;
  TIMED(waits::kRwlockRdlock, real::pthread_rwlock_rdlock()(l));
}

EXPORT_WAIT_WRAPPER int pthread_rwlock_wrlock(pthread_rwlock_t* l) noexcept {
  if (__builtin_expect(!waits::on(), 1)) return real::pthread_rwlock_wrlock()(l);
  int r = pthread_rwlock_trywrlock(l);
  if (r != EBUSY) return r;
  TIMED(waits::kRwlockWrlock, real::pthread_rwlock_wrlock()(l));
}

EXPORT_WAIT_WRAPPER int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  TIMED(waits::kCondWait, real::pthread_cond_wait()(c, m));
}

EXPORT_WAIT_WRAPPER int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m, const struct timespec* abstime) {
  TIMED(waits::kCondTimedwait, real::pthread_cond_timedwait()(c, m, abstime));
}

// std::condition_variable's wait_for and wait_until (GCC 10+, glibc 2.30+).
EXPORT_WAIT_WRAPPER int pthread_cond_clockwait(pthread_cond_t* c, pthread_mutex_t* m, clockid_t clock,
                                  const struct timespec* abstime) {
  if (!real::pthread_cond_clockwait()) return ENOSYS;
  TIMED(waits::kCondClockwait, real::pthread_cond_clockwait()(c, m, clock, abstime));
}

EXPORT_WAIT_WRAPPER int sem_wait(sem_t* s) { TIMED(waits::kSemWait, real::sem_wait()(s)); }

EXPORT_WAIT_WRAPPER int sem_timedwait(sem_t* s, const struct timespec* abstime) {
  TIMED(waits::kSemTimedwait, real::sem_timedwait()(s, abstime));
}

EXPORT_WAIT_WRAPPER int pthread_join(pthread_t t, void** rv) { TIMED(waits::kJoin, real::pthread_join()(t, rv)); }

// --- descriptors ----------------------------------------------------------------
// The fortified (_FORTIFY_SOURCE: __read_chk, ...) and 64-bit-offset
// (pread64) names are what Debian's packages call.

EXPORT_WAIT_WRAPPER ssize_t read(int fd, void* buf, size_t n) { TIMED(waits::kRead, real::read()(fd, buf, n)); }

EXPORT_WAIT_WRAPPER ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  TIMED(waits::kRead, real::read_chk()(fd, buf, n, buflen));
}

EXPORT_WAIT_WRAPPER ssize_t write(int fd, const void* buf, size_t n) {
  TIMED(waits::kWrite, real::write()(fd, buf, n));
}

EXPORT_WAIT_WRAPPER ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  TIMED(waits::kPread, real::pread()(fd, buf, n, off));
}

EXPORT_WAIT_WRAPPER ssize_t pread64(int fd, void* buf, size_t n, off_t off) {
  TIMED(waits::kPread, real::pread64()(fd, buf, n, off));
}

EXPORT_WAIT_WRAPPER ssize_t __pread_chk(int fd, void* buf, size_t n, off_t off, size_t buflen) {
  TIMED(waits::kPread, real::pread_chk()(fd, buf, n, off, buflen));
}

EXPORT_WAIT_WRAPPER ssize_t __pread64_chk(int fd, void* buf, size_t n, off_t off, size_t buflen) {
  TIMED(waits::kPread, real::pread64_chk()(fd, buf, n, off, buflen));
}

EXPORT_WAIT_WRAPPER ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  TIMED(waits::kPwrite, real::pwrite()(fd, buf, n, off));
}

EXPORT_WAIT_WRAPPER ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) {
  TIMED(waits::kPwrite, real::pwrite64()(fd, buf, n, off));
}

EXPORT_WAIT_WRAPPER ssize_t readv(int fd, const struct iovec* iov, int n) {
  TIMED(waits::kReadv, real::readv()(fd, iov, n));
}

EXPORT_WAIT_WRAPPER ssize_t writev(int fd, const struct iovec* iov, int n) {
  TIMED(waits::kWritev, real::writev()(fd, iov, n));
}

EXPORT_WAIT_WRAPPER int fsync(int fd) { TIMED(waits::kFsync, real::fsync()(fd)); }

EXPORT_WAIT_WRAPPER int fdatasync(int fd) { TIMED(waits::kFdatasync, real::fdatasync()(fd)); }

EXPORT_WAIT_WRAPPER int flock(int fd, int op) noexcept { TIMED(waits::kFlock, real::flock()(fd, op)); }

namespace {
// fcntl passes its one optional argument on as glibc reads it (a pointer's
// worth); only the waiting lock commands are timed. Inlined: the return
// address is the wrapper's.
__attribute__((always_inline)) inline int fcntl_with(real::Fcntl fn, int fd, int cmd, void* arg) {
  if (__builtin_expect(!waits::on(), 1) || (cmd != F_SETLKW && cmd != F_OFD_SETLKW)) return fn(fd, cmd, arg);
  uint64_t t0 = waits::now();
  int rc = fn(fd, cmd, arg);
  uint64_t d;
  if (waits::sampled(t0, &d)) waits::record(waits::kFcntl, d, __builtin_return_address(0));
  return rc;
}
}  // namespace

EXPORT_WAIT_WRAPPER int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl_with(real::fcntl(), fd, cmd, arg);
}

EXPORT_WAIT_WRAPPER int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl_with(real::fcntl64(), fd, cmd, arg);
}

// --- sockets --------------------------------------------------------------------

EXPORT_WAIT_WRAPPER ssize_t recv(int fd, void* buf, size_t n, int flags) {
  TIMED(waits::kRecv, real::recv()(fd, buf, n, flags));
}

EXPORT_WAIT_WRAPPER ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  TIMED(waits::kRecv, real::recv_chk()(fd, buf, n, buflen, flags));
}

EXPORT_WAIT_WRAPPER ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* addr, socklen_t* len) {
  TIMED(waits::kRecvfrom, real::recvfrom()(fd, buf, n, flags, addr, len));
}

EXPORT_WAIT_WRAPPER ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, struct sockaddr* addr,
                              socklen_t* len) {
  TIMED(waits::kRecvfrom, real::recvfrom_chk()(fd, buf, n, buflen, flags, addr, len));
}

EXPORT_WAIT_WRAPPER ssize_t recvmsg(int fd, struct msghdr* msg, int flags) {
  TIMED(waits::kRecvmsg, real::recvmsg()(fd, msg, flags));
}

EXPORT_WAIT_WRAPPER int recvmmsg(int fd, struct mmsghdr* v, unsigned n, int flags, struct timespec* timeout) {
  TIMED(waits::kRecvmmsg, real::recvmmsg()(fd, v, n, flags, timeout));
}

EXPORT_WAIT_WRAPPER ssize_t send(int fd, const void* buf, size_t n, int flags) {
  TIMED(waits::kSend, real::send()(fd, buf, n, flags));
}

EXPORT_WAIT_WRAPPER ssize_t sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* addr,
                                   socklen_t len) {
  TIMED(waits::kSendto, real::sendto()(fd, buf, n, flags, addr, len));
}

EXPORT_WAIT_WRAPPER ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  TIMED(waits::kSendmsg, real::sendmsg()(fd, msg, flags));
}

EXPORT_WAIT_WRAPPER int sendmmsg(int fd, struct mmsghdr* v, unsigned n, int flags) {
  TIMED(waits::kSendmmsg, real::sendmmsg()(fd, v, n, flags));
}

EXPORT_WAIT_WRAPPER int accept(int fd, struct sockaddr* addr, socklen_t* len) {
  TIMED(waits::kAccept, real::accept()(fd, addr, len));
}

EXPORT_WAIT_WRAPPER int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  TIMED(waits::kAccept4, real::accept4()(fd, addr, len, flags));
}

EXPORT_WAIT_WRAPPER int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  TIMED(waits::kConnect, real::connect()(fd, addr, len));
}

EXPORT_WAIT_WRAPPER int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                       struct addrinfo** res) {
  TIMED(waits::kGetaddrinfo, real::getaddrinfo()(node, service, hints, res));
}

// --- readiness ------------------------------------------------------------------
// ppoll, pselect and epoll_pwait also carry the program's view of their mask
// for the call (sigmask.h), as the signal API's wrappers did before.

EXPORT_WAIT_WRAPPER int poll(struct pollfd* fds, nfds_t n, int timeout) {
  TIMED(waits::kPoll, real::poll()(fds, n, timeout));
}

EXPORT_WAIT_WRAPPER int __poll_chk(struct pollfd* fds, nfds_t n, int timeout, size_t fdslen) {
  TIMED(waits::kPoll, real::poll_chk()(fds, n, timeout, fdslen));
}

EXPORT_WAIT_WRAPPER int ppoll(struct pollfd* fds, nfds_t n, const struct timespec* timeout, const sigset_t* mask) {
  sigmask::TempView view(mask);
  TIMED(waits::kPpoll, real::ppoll()(fds, n, timeout, view.pass()));
}

EXPORT_WAIT_WRAPPER int __ppoll_chk(struct pollfd* fds, nfds_t n, const struct timespec* timeout, const sigset_t* mask,
                       size_t fdslen) {
  sigmask::TempView view(mask);
  TIMED(waits::kPpoll, real::ppoll_chk()(fds, n, timeout, view.pass(), fdslen));
}

EXPORT_WAIT_WRAPPER int select(int n, fd_set* r, fd_set* w, fd_set* e, struct timeval* timeout) {
  TIMED(waits::kSelect, real::select()(n, r, w, e, timeout));
}

EXPORT_WAIT_WRAPPER int pselect(int n, fd_set* r, fd_set* w, fd_set* e, const struct timespec* timeout,
                                const sigset_t* mask) {
  sigmask::TempView view(mask);
  TIMED(waits::kPselect, real::pselect()(n, r, w, e, timeout, view.pass()));
}

EXPORT_WAIT_WRAPPER int epoll_wait(int epfd, struct epoll_event* ev, int max, int timeout) {
  TIMED(waits::kEpollWait, real::epoll_wait()(epfd, ev, max, timeout));
}

EXPORT_WAIT_WRAPPER int epoll_pwait(int epfd, struct epoll_event* ev, int max, int timeout, const sigset_t* mask) {
  sigmask::TempView view(mask);
  TIMED(waits::kEpollPwait, real::epoll_pwait()(epfd, ev, max, timeout, view.pass()));
}

// --- sleeps and children ----------------------------------------------------------

EXPORT_WAIT_WRAPPER int nanosleep(const struct timespec* req, struct timespec* rem) {
  TIMED(waits::kNanosleep, real::nanosleep()(req, rem));
}

EXPORT_WAIT_WRAPPER int clock_nanosleep(clockid_t clock, int flags, const struct timespec* req, struct timespec* rem) {
  TIMED(waits::kClockNanosleep, real::clock_nanosleep()(clock, flags, req, rem));
}

EXPORT_WAIT_WRAPPER int usleep(useconds_t us) { TIMED(waits::kUsleep, real::usleep()(us)); }

EXPORT_WAIT_WRAPPER unsigned sleep(unsigned s) { TIMED(waits::kSleep, real::sleep()(s)); }

EXPORT_WAIT_WRAPPER pid_t waitpid(pid_t pid, int* status, int options) {
  TIMED(waits::kWaitpid, real::waitpid()(pid, status, options));
}

EXPORT_WAIT_WRAPPER pid_t wait4(pid_t pid, int* status, int options, struct rusage* ru) noexcept {
  TIMED(waits::kWait4, real::wait4()(pid, status, options, ru));
}

EXPORT_WAIT_WRAPPER pid_t wait(int* status) { TIMED(waits::kWait, real::wait()(status)); }
