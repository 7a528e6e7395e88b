// real: the libc functions the shim interposes, resolved with
// dlsym(RTLD_NEXT) on first use. Shim code calls real::X, never the libc
// name, which inside the shim would bind back to our own wrapper.
#pragma once
#include <pthread.h>

namespace real {

using StartMain = int (*)(int (*)(int, char**, char**), int, char**, void (*)(), void (*)(),
                          void (*)(), void*);
using PthreadCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
using Exit = void (*)(int);

StartMain libc_start_main();
PthreadCreate pthread_create();
Exit exit();
Exit quick_exit();

}  // namespace real
