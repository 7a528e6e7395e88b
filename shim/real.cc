// real: lazy dlsym(RTLD_NEXT) of the interposed originals; see real.h.
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

std::atomic<void*> g_start, g_create, g_pexit, g_exit, g_quick_exit, g__exit, g__Exit, g_sigaction,
    g_signal, g_execve, g_execvpe, g_fexecve, g_execveat, g_dlclose;

}  // namespace

void resolve_all() {
  libc_start_main(), pthread_create(), pthread_exit(), exit(), quick_exit(), _exit(), _Exit();
  sigaction(), signal(), execve(), execvpe(), fexecve(), execveat(), dlclose();
}

StartMain libc_start_main() { return resolve<StartMain>(g_start, "__libc_start_main"); }
PthreadCreate pthread_create() { return resolve<PthreadCreate>(g_create, "pthread_create"); }
PthreadExit pthread_exit() { return resolve<PthreadExit>(g_pexit, "pthread_exit"); }
Exit exit() { return resolve<Exit>(g_exit, "exit"); }
Exit quick_exit() { return resolve<Exit>(g_quick_exit, "quick_exit"); }
Exit _exit() { return resolve<Exit>(g__exit, "_exit"); }
Exit _Exit() { return resolve<Exit>(g__Exit, "_Exit"); }
Sigaction sigaction() { return resolve<Sigaction>(g_sigaction, "sigaction"); }
Signal signal() { return resolve<Signal>(g_signal, "signal"); }
Execve execve() { return resolve<Execve>(g_execve, "execve"); }
Execvpe execvpe() { return resolve<Execvpe>(g_execvpe, "execvpe"); }
Fexecve fexecve() { return resolve<Fexecve>(g_fexecve, "fexecve"); }
Dlclose dlclose() { return resolve<Dlclose>(g_dlclose, "dlclose"); }
Execveat execveat() { return resolve<Execveat>(g_execveat, "execveat", false); }

}  // namespace real
