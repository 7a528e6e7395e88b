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
#include <netdb.h>
#include <semaphore.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>

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
using Chroot = int (*)(const char*);
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
using Dlopen = void* (*)(const char*, int);
using Error = void (*)(int, int, const char*, ...);

// The blocking calls the wait profile times (hooks_wait.cc).
using MutexLock = int (*)(pthread_mutex_t*);
using MutexTimedlock = int (*)(pthread_mutex_t*, const struct timespec*);
using RwlockLock = int (*)(pthread_rwlock_t*);
using CondWait = int (*)(pthread_cond_t*, pthread_mutex_t*);
using CondTimedwait = int (*)(pthread_cond_t*, pthread_mutex_t*, const struct timespec*);
using CondClockwait = int (*)(pthread_cond_t*, pthread_mutex_t*, clockid_t, const struct timespec*);
using SemWait = int (*)(sem_t*);
using SemTimedwait = int (*)(sem_t*, const struct timespec*);
using Join = int (*)(pthread_t, void**);
using Read = ssize_t (*)(int, void*, size_t);
using Write = ssize_t (*)(int, const void*, size_t);
using Pread = ssize_t (*)(int, void*, size_t, off_t);
using Pwrite = ssize_t (*)(int, const void*, size_t, off_t);
using Readv = ssize_t (*)(int, const struct iovec*, int);
using ReadChk = ssize_t (*)(int, void*, size_t, size_t);
using PreadChk = ssize_t (*)(int, void*, size_t, off_t, size_t);
using Recv = ssize_t (*)(int, void*, size_t, int);
using RecvChk = ssize_t (*)(int, void*, size_t, size_t, int);
using Recvfrom = ssize_t (*)(int, void*, size_t, int, struct sockaddr*, socklen_t*);
using RecvfromChk = ssize_t (*)(int, void*, size_t, size_t, int, struct sockaddr*, socklen_t*);
using Recvmsg = ssize_t (*)(int, struct msghdr*, int);
using Recvmmsg = int (*)(int, struct mmsghdr*, unsigned, int, struct timespec*);
using Send = ssize_t (*)(int, const void*, size_t, int);
using Sendto = ssize_t (*)(int, const void*, size_t, int, const struct sockaddr*, socklen_t);
using Sendmsg = ssize_t (*)(int, const struct msghdr*, int);
using Sendmmsg = int (*)(int, struct mmsghdr*, unsigned, int);
using Accept = int (*)(int, struct sockaddr*, socklen_t*);
using Accept4 = int (*)(int, struct sockaddr*, socklen_t*, int);
using Connect = int (*)(int, const struct sockaddr*, socklen_t);
using Poll = int (*)(struct pollfd*, nfds_t, int);
using PollChk = int (*)(struct pollfd*, nfds_t, int, size_t);
using PpollChk = int (*)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*, size_t);
using Select = int (*)(int, fd_set*, fd_set*, fd_set*, struct timeval*);
using EpollWait = int (*)(int, struct epoll_event*, int, int);
using Nanosleep = int (*)(const struct timespec*, struct timespec*);
using ClockNanosleep = int (*)(clockid_t, int, const struct timespec*, struct timespec*);
using Usleep = int (*)(useconds_t);
using Sleep = unsigned (*)(unsigned);
using Getaddrinfo = int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
using Waitpid = pid_t (*)(pid_t, int*, int);
using Wait4 = pid_t (*)(pid_t, int*, int, struct rusage*);
using Wait = pid_t (*)(int*);
using Fcntl = int (*)(int, int, ...);

// Resolves every original now (the constructor calls it, inert or not): a
// first dlsym inside a vfork child would write to the parent's memory.
// Returns the name of the first required original this libc lacks (setup
// fails on it when profiling; inert, nothing is reported), or nullptr.
const char* resolve_all();

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
Chroot chroot();
IntOfInt unshare();
IntOfIntInt setns();
Execve execve();
Execvpe execvpe();
Fexecve fexecve();
Execveat execveat();  // may be null on an old libc
Dlclose dlclose();
Dlopen dlopen();
Error error();

MutexLock pthread_mutex_lock();
MutexTimedlock pthread_mutex_timedlock();
RwlockLock pthread_rwlock_rdlock();
RwlockLock pthread_rwlock_wrlock();
CondWait pthread_cond_wait();
CondTimedwait pthread_cond_timedwait();
CondClockwait pthread_cond_clockwait();  // may be null on an old libc
SemWait sem_wait();
SemTimedwait sem_timedwait();
Join pthread_join();
Read read();
ReadChk read_chk();
Write write();
Pread pread();
Pread pread64();
PreadChk pread_chk();
PreadChk pread64_chk();
Pwrite pwrite();
Pwrite pwrite64();
Readv readv();
Readv writev();
Recv recv();
RecvChk recv_chk();
Recvfrom recvfrom();
RecvfromChk recvfrom_chk();
Recvmsg recvmsg();
Recvmmsg recvmmsg();
Send send();
Sendto sendto();
Sendmsg sendmsg();
Sendmmsg sendmmsg();
Accept accept();
Accept4 accept4();
Connect connect();
Poll poll();
PollChk poll_chk();
PpollChk ppoll_chk();
Select select();
EpollWait epoll_wait();
Nanosleep nanosleep();
ClockNanosleep clock_nanosleep();
Usleep usleep();
Sleep sleep();
IntOfInt fsync();
IntOfInt fdatasync();
Getaddrinfo getaddrinfo();
Waitpid waitpid();
Wait4 wait4();
Wait wait();
IntOfIntInt flock();
Fcntl fcntl();
Fcntl fcntl64();

}  // namespace real
