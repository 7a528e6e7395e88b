// real: lazy dlsym(RTLD_NEXT) of the interposed originals; see real.h.
#include "real.h"

#include <dlfcn.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <atomic>

namespace real {
namespace {

// A missing required original means this libc is not one we can live in;
// there is nothing sane to fall back to but ending the process.
void* need(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    static const char msg[] = "# profshim: error: libc lacks an interposed function\n";
    (void)!write(2, msg, sizeof msg - 1);
    syscall(SYS_exit_group, 127);
  }
  return p;
}

template <typename T>
T resolve(std::atomic<void*>& slot, const char* name) {
  void* p = slot.load(std::memory_order_acquire);
  if (!p) {
    p = need(name);
    slot.store(p, std::memory_order_release);
  }
  return reinterpret_cast<T>(p);
}

std::atomic<void*> g_start, g_create, g_exit, g_quick_exit;

}  // namespace

StartMain libc_start_main() { return resolve<StartMain>(g_start, "__libc_start_main"); }
PthreadCreate pthread_create() { return resolve<PthreadCreate>(g_create, "pthread_create"); }
Exit exit() { return resolve<Exit>(g_exit, "exit"); }
Exit quick_exit() { return resolve<Exit>(g_quick_exit, "quick_exit"); }

}  // namespace real
