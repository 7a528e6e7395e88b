// real: the libc functions the shim interposes, resolved with
// dlsym(RTLD_NEXT) in the constructor. Shim code calls real::X, never the
// libc name, which inside the shim would bind back to our own wrapper.
#pragma once
#include <pthread.h>
#include <signal.h>
#include <poll.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>

namespace real {

using StartMain = int (*)(int (*)(int, char**, char**), int, char**, void (*)(), void (*)(),
                          void (*)(), void*);
using PthreadCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
using Exit = void (*)(int);
using PthreadExit = void (*)(void*);
using Sigaction = int (*)(int, const struct sigaction*, struct sigaction*);
using Signal = sighandler_t (*)(int, sighandler_t);
using Sigmask = int (*)(int, const sigset_t*, sigset_t*);
using Sigwait = int (*)(const sigset_t*, int*);
using Sigwaitinfo = int (*)(const sigset_t*, siginfo_t*);
using Sigtimedwait = int (*)(const sigset_t*, siginfo_t*, const struct timespec*);
using IntOfInt = int (*)(int);
using IntOfIntInt = int (*)(int, int);
using Dup3 = int (*)(int, int, int);
using CloseRange = int (*)(unsigned, unsigned, int);
using Closefrom = void (*)(int);
using Setsid = pid_t (*)();
using AssertFail = void (*)(const char*, const char*, unsigned, const char*);
using Sigsuspend = int (*)(const sigset_t*);
using Ppoll = int (*)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*);
using Pselect = int (*)(int, fd_set*, fd_set*, fd_set*, const struct timespec*, const sigset_t*);
using EpollPwait = int (*)(int, struct epoll_event*, int, int, const sigset_t*);
using Fclose = int (*)(FILE*);
using Freopen = FILE* (*)(const char*, const char*, FILE*);
using Execve = int (*)(const char*, char* const[], char* const[]);
using Execvpe = int (*)(const char*, char* const[], char* const[]);
using Fexecve = int (*)(int, char* const[], char* const[]);
using Execveat = int (*)(int, const char*, char* const[], char* const[], int);
using Dlclose = int (*)(void*);
using Error = void (*)(int, int, const char*, ...);

// Resolves every original now (the constructor calls it, inert or not): a
// first dlsym inside a vfork child would write to the parent's memory.
void resolve_all();

StartMain libc_start_main();
PthreadCreate pthread_create();
PthreadExit pthread_exit();
Exit exit();
Exit quick_exit();
Exit _exit();
Exit _Exit();
Sigaction sigaction();
Signal signal();
Signal sysv_signal();
Signal sigset();
IntOfInt sigignore();
IntOfIntInt siginterrupt();
IntOfInt sighold();
IntOfInt sigrelse();
Sigmask sigprocmask();
Sigmask pthread_sigmask();
Sigwait sigwait();
Sigwaitinfo sigwaitinfo();
Sigtimedwait sigtimedwait();
IntOfInt close();
IntOfIntInt dup2();
Dup3 dup3();
CloseRange close_range();  // may be null on an old libc
Closefrom closefrom();      // may be null on an old libc
Setsid setsid();
AssertFail assert_fail();
Sigsuspend sigsuspend();
Ppoll ppoll();
Pselect pselect();
EpollPwait epoll_pwait();
Fclose fclose();
Freopen freopen();
Freopen freopen64();
IntOfIntInt daemon();
Execve execve();
Execvpe execvpe();
Fexecve fexecve();
Execveat execveat();  // may be null on an old libc
Dlclose dlclose();
Error error();

}  // namespace real
