// recover: recovery points and the shim's operator new; see recover.h.
#include "recover.h"

#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <new>

#include "errline.h"
#include "sys.h"

namespace recover {
namespace {

__thread sigjmp_buf* t_jmp;
__thread const char* t_why;

[[noreturn]] void leave(const char* why) {
  t_why = why;
  siglongjmp(*t_jmp, 1);
}

}  // namespace

bool run(void (*fn)(void*), void* arg, const char** why) {
  sigjmp_buf jb;
  sigjmp_buf* outer = t_jmp;
  if (sigsetjmp(jb, 1) == 0) {
    t_jmp = &jb;
    fn(arg);
    t_jmp = outer;
    return true;
  }
  t_jmp = outer;
  if (why) *why = t_why;
  return false;
}

bool active() { return t_jmp != nullptr; }

void escape_from_fault(int sig) {
  switch (sig) {
    case SIGSEGV: leave("the stop crashed (SIGSEGV)");
    case SIGBUS: leave("the stop crashed (SIGBUS)");
    case SIGFPE: leave("the stop crashed (SIGFPE)");
    case SIGABRT: leave("the stop aborted (SIGABRT)");
    default: leave("the stop crashed (SIGILL)");
  }
}

void fail(const char* why) { leave(why); }

[[noreturn]] void out_of_memory() {
  if (t_jmp) leave("out of memory");
  // Outside any stop (a failure the shim cannot step around): say whose.
  errline::line("error: out of memory inside the shim");
  syscall(SYS_tgkill, syscall(SYS_getpid), syscall(SYS_gettid), SIGABRT);
  _exit(134);
}

}  // namespace recover

// The shim's own operator new and delete (hidden, like everything else the
// version script does not name). Never throws: see recover.h.
namespace {
void* checked(void* p) {
  if (!p) recover::out_of_memory();
  return p;
}
void* aligned(size_t n, std::align_val_t a) {
  size_t al = size_t(a) < sizeof(void*) ? sizeof(void*) : size_t(a);
  void* p = nullptr;
  return posix_memalign(&p, al, n ? n : 1) == 0 ? p : nullptr;
}
}  // namespace

void* operator new(size_t n) { return checked(malloc(n ? n : 1)); }
void* operator new[](size_t n) { return checked(malloc(n ? n : 1)); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return malloc(n ? n : 1); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return malloc(n ? n : 1); }
void* operator new(size_t n, std::align_val_t a) { return checked(aligned(n, a)); }
void* operator new[](size_t n, std::align_val_t a) { return checked(aligned(n, a)); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return aligned(n, a); }
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return aligned(n, a); }
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { free(p); }
void operator delete(void* p, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { free(p); }
