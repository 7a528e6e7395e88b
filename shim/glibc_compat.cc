// glibc_compat: the library binds no glibc symbol version newer than 2.31;
// see glibc_compat.h and docs/DESIGN.md "Which glibc".
#include "glibc_compat.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "real.h"

// --- functions bound to their old version ----------------------------------
// glibc 2.34 moved libpthread's, libdl's and librt's functions into libc and
// gave them a new default version there (GLIBC_2.34); the old one stays as a
// compatibility symbol. Each reference to one of them, the shim's own and
// those of the archives linked in (libstdc++, libgcc, jemalloc), is sent by
// the link (-Wl,--wrap=NAME) to __wrap_NAME, a jump to NAME@OLD. On 2.31 the
// old version is found in libpthread.so.0 / libdl.so.2 / librt.so.1, which
// the library names as needed (on 2.34 and later they are empty stubs and
// the lookup finds the same symbol in libc). The Makefile reads the names
// to wrap from the OLD and OLD_AS lines below: one list.
#if defined(__x86_64__)
#define PICK(x86, arm) x86
#define JUMP(target) "jmp " target "@PLT"
#elif defined(__aarch64__)
#define PICK(x86, arm) arm
#define JUMP(target) "b " target
#else
#error "glibc_compat: unknown architecture (its glibc's base symbol versions are needed here)"
#endif

// The versions are x86-64's and arm64's (whose glibc starts at 2.17).
// A jump, not a call: the caller's return address is what libc sees (dlsym's
// RTLD_NEXT is relative to it), and no frame of ours is between.
#define OLD(sym, x86_version, arm_version) OLD_AS(sym, sym, x86_version, arm_version)
#define OLD_AS(sym, old, x86_version, arm_version)                                   \
  __asm__(".symver profshim_old_" #sym ", " #old "@" PICK(x86_version, arm_version) "\n" \
          ".text\n.globl __wrap_" #sym "\n.hidden __wrap_" #sym "\n"                 \
          ".type __wrap_" #sym ", %function\n__wrap_" #sym ":\n.cfi_startproc\n\t"    \
          JUMP("profshim_old_" #sym) "\n.cfi_endproc\n"                               \
          ".size __wrap_" #sym ", .-__wrap_" #sym "\n");

// libpthread's
OLD(__pthread_key_create, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_key_create, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_getspecific, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_setspecific, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_once, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_mutex_trylock, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_mutexattr_init, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_mutexattr_destroy, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_mutexattr_settype, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_rwlock_tryrdlock, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_rwlock_trywrlock, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_attr_getguardsize, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_attr_getstack, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_attr_getstacksize, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_attr_setstacksize, "GLIBC_2.2.5", "GLIBC_2.17")
// 2.32's pthread_getattr_np also fills in the attribute's signal mask,
// which the shim never reads.
OLD(pthread_getattr_np, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(pthread_getattr_default_np, "GLIBC_2.18", "GLIBC_2.18")
OLD(pthread_getname_np, "GLIBC_2.12", "GLIBC_2.17")
OLD(pthread_setname_np, "GLIBC_2.12", "GLIBC_2.17")
// libdl's
OLD(dlsym, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(dlvsym, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(dlerror, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(dladdr, "GLIBC_2.2.5", "GLIBC_2.17")
OLD(dladdr1, "GLIBC_2.3.3", "GLIBC_2.17")
// librt's (2.3.3: the timer_t that is the kernel's id; 2.2.5's is older)
OLD(timer_create, "GLIBC_2.3.3", "GLIBC_2.17")
OLD(timer_settime, "GLIBC_2.3.3", "GLIBC_2.17")
OLD(timer_delete, "GLIBC_2.3.3", "GLIBC_2.17")

// glibc 2.38 (Debian 13) headers send strtol and sscanf to their C23
// versions under _GNU_SOURCE (they also read "0b101"): the shim's and
// libstdc++'s calls bound to the classic ones, which parse all it reads.
OLD_AS(__isoc23_strtol, strtol, "GLIBC_2.2.5", "GLIBC_2.17")
OLD_AS(__isoc23_strtoul, strtoul, "GLIBC_2.2.5", "GLIBC_2.17")
OLD_AS(__isoc23_strtoll, strtoll, "GLIBC_2.2.5", "GLIBC_2.17")
OLD_AS(__isoc23_strtoull, strtoull, "GLIBC_2.2.5", "GLIBC_2.17")
OLD_AS(__isoc23_strtoimax, strtoimax, "GLIBC_2.2.5", "GLIBC_2.17")
OLD_AS(__isoc23_strtoumax, strtoumax, "GLIBC_2.2.5", "GLIBC_2.17")
OLD_AS(__isoc23_sscanf, __isoc99_sscanf, "GLIBC_2.7", "GLIBC_2.17")
OLD_AS(__isoc23_vsscanf, __isoc99_vsscanf, "GLIBC_2.7", "GLIBC_2.17")
OLD_AS(__isoc23_fscanf, __isoc99_fscanf, "GLIBC_2.7", "GLIBC_2.17")
OLD_AS(__isoc23_vfscanf, __isoc99_vfscanf, "GLIBC_2.7", "GLIBC_2.17")
OLD_AS(__isoc23_wcstol, wcstol, "GLIBC_2.2.5", "GLIBC_2.17")
OLD_AS(__isoc23_wcstoul, wcstoul, "GLIBC_2.2.5", "GLIBC_2.17")
OLD_AS(__isoc23_wcstoll, wcstoll, "GLIBC_2.2.5", "GLIBC_2.17")
OLD_AS(__isoc23_wcstoull, wcstoull, "GLIBC_2.2.5", "GLIBC_2.17")

// --- stat, fstat, lstat, fstatat -------------------------------------------
// Real functions since 2.33; before, inline calls to __xstat and its
// siblings with the structure's version, which every glibc still exports.
#if defined(__x86_64__)
constexpr int kStatVer = 1;  // _STAT_VER_LINUX
#else
constexpr int kStatVer = 0;
#endif
extern "C" {
int profshim_old_xstat(int, const char*, struct stat*);
int profshim_old_lxstat(int, const char*, struct stat*);
int profshim_old_fxstat(int, int, struct stat*);
int profshim_old_fxstatat(int, int, const char*, struct stat*, int);
}
__asm__(".symver profshim_old_xstat, __xstat@" PICK("GLIBC_2.2.5", "GLIBC_2.17") "\n"
        ".symver profshim_old_lxstat, __lxstat@" PICK("GLIBC_2.2.5", "GLIBC_2.17") "\n"
        ".symver profshim_old_fxstat, __fxstat@" PICK("GLIBC_2.2.5", "GLIBC_2.17") "\n"
        ".symver profshim_old_fxstatat, __fxstatat@" PICK("GLIBC_2.4", "GLIBC_2.17") "\n");

#define HIDDEN extern "C" __attribute__((visibility("hidden")))
HIDDEN int __wrap_stat(const char* path, struct stat* st) { return profshim_old_xstat(kStatVer, path, st); }
HIDDEN int __wrap_lstat(const char* path, struct stat* st) { return profshim_old_lxstat(kStatVer, path, st); }
HIDDEN int __wrap_fstat(int fd, struct stat* st) { return profshim_old_fxstat(kStatVer, fd, st); }
HIDDEN int __wrap_fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  return profshim_old_fxstatat(kStatVer, dirfd, path, st, flags);
}

// --- stand-ins for what has no old version ----------------------------------
// 2.32: read by libstdc++'s inline code to skip atomics. 0 ("maybe
// threaded") is always correct, only not the fastest.
extern "C" {
__attribute__((visibility("hidden"))) char __libc_single_threaded;  // zero
}

// 2.36: libstdc++'s std::random_device. The kernel's generator, as glibc's.
HIDDEN uint32_t __wrap_arc4random(void) {
  uint32_t v = 0;
  if (syscall(SYS_getrandom, &v, sizeof v, 0) == long(sizeof v)) return v;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint32_t(ts.tv_nsec) ^ uint32_t(ts.tv_sec) * 2654435761u ^ uint32_t(getpid()) << 16;
}

// --- looked up at setup --------------------------------------------------------
namespace glibc_compat {
namespace {

using SetSigmask = int (*)(pthread_attr_t*, const sigset_t*);
SetSigmask g_setsigmask;  // 2.32

}  // namespace

void init() {
  g_setsigmask = reinterpret_cast<SetSigmask>(dlsym(RTLD_DEFAULT, "pthread_attr_setsigmask_np"));
  objects_init();
}

int create_masked(CreateFn create, pthread_t* t, pthread_attr_t* attr, const sigset_t* mask,
                  void* (*fn)(void*), void* arg) {
  if (g_setsigmask && g_setsigmask(attr, mask) == 0) return create(t, attr, fn, arg);
  // The original pthread_sigmask (not the shim's, which keeps its own signal
  // unblocked): glibc keeps its internal signals out of the mask.
  sigset_t old;
  if (real::pthread_sigmask()(SIG_SETMASK, mask, &old) != 0) return create(t, attr, fn, arg);
  const int rc = create(t, attr, fn, arg);
  real::pthread_sigmask()(SIG_SETMASK, &old, nullptr);
  return rc;
}

}  // namespace glibc_compat

