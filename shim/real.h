// real: the libc functions the shim interposes, resolved with
// dlsym(RTLD_NEXT) on first use. Shim code calls real::X, never the libc
// name, which inside the shim would bind back to our own wrapper.
#pragma once
#include <pthread.h>
#include <signal.h>

namespace real {

using StartMain = int (*)(int (*)(int, char**, char**), int, char**, void (*)(), void (*)(),
                          void (*)(), void*);
using PthreadCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
using Exit = void (*)(int);
using PthreadExit = void (*)(void*);
using Sigaction = int (*)(int, const struct sigaction*, struct sigaction*);
using Signal = sighandler_t (*)(int, sighandler_t);
using Execve = int (*)(const char*, char* const[], char* const[]);
using Execvpe = int (*)(const char*, char* const[], char* const[]);
using Fexecve = int (*)(int, char* const[], char* const[]);
using Execveat = int (*)(int, const char*, char* const[], char* const[], int);

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
Execve execve();
Execvpe execvpe();
Fexecve fexecve();
Execveat execveat();  // may be null on an old libc
using Dlclose = int (*)(void*);
Dlclose dlclose();

}  // namespace real
