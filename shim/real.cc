// real: dlsym(RTLD_NEXT) of the interposed originals; see real.h.
#include "real.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace real {
namespace {

// A missing required original means this libc is not one we can live in;
// there is nothing sane to fall back to but ending the process.
void* need(const char* name, bool required) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p && required) {
    static const char msg[] = "# profshim: error: libc lacks an interposed function\n";
    (void)!write(2, msg, sizeof msg - 1);
    syscall(SYS_exit_group, 127);
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
REAL(execve, Execve, "execve", true)
REAL(execvpe, Execvpe, "execvpe", true)
REAL(fexecve, Fexecve, "fexecve", true)
REAL(execveat, Execveat, "execveat", false)
REAL(dlclose, Dlclose, "dlclose", true)
REAL(error, Error, "error", true)

void resolve_all() {
  libc_start_main(), pthread_create(), pthread_exit(), exit(), quick_exit(), _exit(), _Exit();
  sigaction(), signal(), sysv_signal(), sigset(), sigignore(), siginterrupt(), sighold(), sigrelse();
  sigprocmask(), pthread_sigmask(), sigwait(), sigwaitinfo(), sigtimedwait();
  sigsuspend(), ppoll(), pselect(), epoll_pwait();
  close(), dup2(), dup3(), close_range(), closefrom(), setsid(), daemon(), assert_fail(), fclose(), freopen(), freopen64();
  execve(), execvpe(), fexecve(), execveat(), dlclose(), error();
}

}  // namespace real
