// real: dlsym(RTLD_NEXT) of the interposed originals; see real.h.
#include "real.h"
#include "sys.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string.h>

#include <atomic>

namespace real {
namespace {

// While resolve_all runs (the constructor): a missing original is noted,
// for setup to report, not fatal.
bool g_probing;
const char* g_missing;

// The version an original must be looked up at. dlsym does not always give
// a name's default version: on glibc 2.31 dlsym(RTLD_NEXT,
// "pthread_cond_timedwait") returns the GLIBC_2.2.5 one, built for the
// pre-2.3.2 condition variable layout, and a program's condvar waited on
// with it may never wake (xz -T2 spun). Every other interposed name has one
// behaviour across its versions (docs/DESIGN.md "Which glibc").
const char* version_of(const char* name) {
#if defined(__x86_64__)
  if (strncmp(name, "pthread_cond_", 13) == 0 && strcmp(name, "pthread_cond_clockwait") != 0) return "GLIBC_2.3.2";
#endif
  return nullptr;
}

// A missing required original met outside the constructor (a program
// calling what its libc lacks): there is nothing sane to pass it to.
void* need(const char* name, bool required) {
  void* p = nullptr;
  if (const char* v = version_of(name)) p = dlvsym(RTLD_NEXT, name, v);
  if (!p) p = dlsym(RTLD_NEXT, name);
  if (!p && required) {
    if (g_probing) {
      if (!g_missing) g_missing = name;
      return nullptr;
    }
    static const char msg[] = "# profshim: error: libc lacks an interposed function: ";
    (void)!::write(2, msg, sizeof msg - 1);
    (void)!::write(2, name, strlen(name));
    (void)!::write(2, "\n", 1);
    sys::exit_group(127);
  }
  return p;
}

template <typename T>
T resolve(std::atomic<void*>& slot, const char* name, bool required = true) {
  void* p = slot.load(std::memory_order_acquire);
  if (!p) {
    p = need(name, required);
    slot.store(p, std::memory_order_release);
  }
  return reinterpret_cast<T>(p);
}

}  // namespace

// Each original's slot is a function-local static without a constructor:
// zero at load, no guard, no dynamic initialiser (DESIGN "Globals").
#define REAL(fn, type, name, required) \
  type fn() {                          \
    static std::atomic<void*> slot;    \
    return resolve<type>(slot, name, required); \
  }

REAL(libc_start_main, StartMain, "__libc_start_main", true)
REAL(pthread_create, PthreadCreate, "pthread_create", true)
REAL(pthread_exit, PthreadExit, "pthread_exit", true)
REAL(exit, Exit, "exit", true)
REAL(quick_exit, Exit, "quick_exit", true)
REAL(_exit, Exit, "_exit", true)
REAL(_Exit, Exit, "_Exit", true)
REAL(sigaction, Sigaction, "sigaction", true)
REAL(signal, Signal, "signal", true)
REAL(sysv_signal, Signal, "sysv_signal", true)
REAL(sigset, Signal, "sigset", true)
REAL(sigignore, IntOfInt, "sigignore", true)
REAL(siginterrupt, IntOfIntInt, "siginterrupt", true)
REAL(sighold, IntOfInt, "sighold", true)
REAL(sigrelse, IntOfInt, "sigrelse", true)
REAL(sigprocmask, Sigmask, "sigprocmask", true)
REAL(pthread_sigmask, Sigmask, "pthread_sigmask", true)
REAL(sigwait, Sigwait, "sigwait", true)
REAL(sigwaitinfo, Sigwaitinfo, "sigwaitinfo", true)
REAL(sigtimedwait, Sigtimedwait, "sigtimedwait", true)
REAL(close, IntOfInt, "close", true)
REAL(dup2, IntOfIntInt, "dup2", true)
REAL(dup3, Dup3, "dup3", true)
REAL(close_range, CloseRange, "close_range", false)
REAL(closefrom, Closefrom, "closefrom", false)
REAL(setsid, Setsid, "setsid", true)
REAL(assert_fail, AssertFail, "__assert_fail", true)
REAL(sigsuspend, Sigsuspend, "sigsuspend", true)
REAL(ppoll, Ppoll, "ppoll", true)
REAL(pselect, Pselect, "pselect", true)
REAL(epoll_pwait, EpollPwait, "epoll_pwait", true)
REAL(fclose, Fclose, "fclose", true)
REAL(freopen, Freopen, "freopen", true)
REAL(freopen64, Freopen, "freopen64", true)
REAL(daemon, IntOfIntInt, "daemon", true)
REAL(chroot, Chroot, "chroot", true)
REAL(unshare, IntOfInt, "unshare", true)
REAL(setns, IntOfIntInt, "setns", true)
REAL(execve, Execve, "execve", true)
REAL(execvpe, Execvpe, "execvpe", true)
REAL(fexecve, Fexecve, "fexecve", true)
REAL(execveat, Execveat, "execveat", false)
REAL(dlclose, Dlclose, "dlclose", true)
REAL(dlopen, Dlopen, "dlopen", true)
REAL(error, Error, "error", true)

REAL(pthread_mutex_lock, MutexLock, "pthread_mutex_lock", true)
REAL(pthread_mutex_timedlock, MutexTimedlock, "pthread_mutex_timedlock", true)
REAL(pthread_rwlock_rdlock, RwlockLock, "pthread_rwlock_rdlock", true)
REAL(pthread_rwlock_wrlock, RwlockLock, "pthread_rwlock_wrlock", true)
REAL(pthread_cond_wait, CondWait, "pthread_cond_wait", true)
REAL(pthread_cond_timedwait, CondTimedwait, "pthread_cond_timedwait", true)
REAL(pthread_cond_clockwait, CondClockwait, "pthread_cond_clockwait", false)
REAL(sem_wait, SemWait, "sem_wait", true)
REAL(sem_timedwait, SemTimedwait, "sem_timedwait", true)
REAL(pthread_join, Join, "pthread_join", true)
REAL(read, Read, "read", true)
REAL(read_chk, ReadChk, "__read_chk", true)
REAL(write, Write, "write", true)
REAL(pread, Pread, "pread", true)
REAL(pread64, Pread, "pread64", true)
REAL(pread_chk, PreadChk, "__pread_chk", true)
REAL(pread64_chk, PreadChk, "__pread64_chk", true)
REAL(pwrite, Pwrite, "pwrite", true)
REAL(pwrite64, Pwrite, "pwrite64", true)
REAL(readv, Readv, "readv", true)
REAL(writev, Readv, "writev", true)
REAL(recv, Recv, "recv", true)
REAL(recv_chk, RecvChk, "__recv_chk", true)
REAL(recvfrom, Recvfrom, "recvfrom", true)
REAL(recvfrom_chk, RecvfromChk, "__recvfrom_chk", true)
REAL(recvmsg, Recvmsg, "recvmsg", true)
REAL(recvmmsg, Recvmmsg, "recvmmsg", true)
REAL(send, Send, "send", true)
REAL(sendto, Sendto, "sendto", true)
REAL(sendmsg, Sendmsg, "sendmsg", true)
REAL(sendmmsg, Sendmmsg, "sendmmsg", true)
REAL(accept, Accept, "accept", true)
REAL(accept4, Accept4, "accept4", true)
REAL(connect, Connect, "connect", true)
REAL(poll, Poll, "poll", true)
REAL(poll_chk, PollChk, "__poll_chk", true)
REAL(ppoll_chk, PpollChk, "__ppoll_chk", true)
REAL(select, Select, "select", true)
REAL(epoll_wait, EpollWait, "epoll_wait", true)
REAL(nanosleep, Nanosleep, "nanosleep", true)
REAL(clock_nanosleep, ClockNanosleep, "clock_nanosleep", true)
REAL(usleep, Usleep, "usleep", true)
REAL(sleep, Sleep, "sleep", true)
REAL(fsync, IntOfInt, "fsync", true)
REAL(fdatasync, IntOfInt, "fdatasync", true)
REAL(getaddrinfo, Getaddrinfo, "getaddrinfo", true)
REAL(waitpid, Waitpid, "waitpid", true)
REAL(wait4, Wait4, "wait4", true)
REAL(wait, Wait, "wait", true)
REAL(flock, IntOfIntInt, "flock", true)
REAL(fcntl, Fcntl, "fcntl", true)
REAL(fcntl64, Fcntl, "fcntl64", true)

const char* resolve_all() {
  g_probing = true;
  libc_start_main(), pthread_create(), pthread_exit(), exit(), quick_exit(), _exit(), _Exit();
  sigaction(), signal(), sysv_signal(), sigset(), sigignore(), siginterrupt(), sighold(), sigrelse();
  sigprocmask(), pthread_sigmask(), sigwait(), sigwaitinfo(), sigtimedwait();
  sigsuspend(), ppoll(), pselect(), epoll_pwait();
  close(), dup2(), dup3(), close_range(), closefrom(), setsid(), daemon(), chroot(), unshare(), setns(), assert_fail(), fclose(), freopen(), freopen64();
  execve(), execvpe(), fexecve(), execveat(), dlclose(), dlopen(), error();
  pthread_mutex_lock(), pthread_mutex_timedlock(), pthread_rwlock_rdlock(), pthread_rwlock_wrlock();
  pthread_cond_wait(), pthread_cond_timedwait(), pthread_cond_clockwait(), sem_wait(), sem_timedwait();
  pthread_join(), read(), read_chk(), write(), pread(), pread64(), pread_chk(), pread64_chk(), pwrite();
  pwrite64(), readv(), writev(), recv(), recv_chk(), recvfrom(), recvfrom_chk(), recvmsg(), recvmmsg();
  send(), sendto(), sendmsg(), sendmmsg(), accept(), accept4(), connect(), poll(), poll_chk(), ppoll_chk();
  select(), epoll_wait(), nanosleep(), clock_nanosleep(), usleep(), sleep(), fsync(), fdatasync();
  getaddrinfo(), waitpid(), wait4(), wait(), flock(), fcntl(), fcntl64();
  g_probing = false;
  return g_missing;
}

}  // namespace real
