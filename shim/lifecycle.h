// lifecycle: the process image's profiling state machine
// (INERT | RUNNING -> STOPPING -> DONE), the one constructor that sets
// profiling up (fail-fast: exit 78 on a setup error), the stop thread that
// runs finish::run, the bounded wait every stop path goes through, and the
// identity of the image (root or not, the names of its files) across fork
// and exec.
#pragma once

namespace lifecycle {

// True from a successful setup until the stop completes.
bool active();
// Asks for the image's profiles and waits for them, at most the stop
// timeout. Idempotent and race-free: the first caller starts the stop, every
// caller (a second thread in exit, say) waits for the same one. Does
// nothing in a vfork child, which shares the parent's memory.
void stop(const char* how);
// The same from a signal handler: async-signal-safe.
void stop_from_signal(int sig);

// Around an exec: writes the old image's profiles and returns the
// environment to exec with (envp itself, or a copy of its own carrying the
// image marker). exec_failed(envp, env) frees that copy and resumes
// profiling when the exec returned.
char* const* before_exec(char* const envp[]);
void exec_failed(char* const envp[], char* const* env);

// True in a child of vfork (or posix_spawn), which shares the parent's
// memory: the shim must write nothing there.
bool in_vfork_child();

// pthread_exit from the main thread: the process lives on until its last
// thread ends, and libc's own exit then is not one an interposer sees.
void main_thread_exiting();
// Around pthread_create: counted before the thread exists (main may call
// pthread_exit before the new thread first runs), uncounted if creation
// fails; thread_started() runs in the new thread and arms its end.
void thread_creating();
void thread_create_failed();
void thread_started();

}  // namespace lifecycle
