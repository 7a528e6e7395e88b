// sys: async-signal-safe primitives (raw syscalls, clocks, futex waits).
// Every function here may run in a signal handler unless its comment says
// otherwise.
#pragma once
#include <sys/resource.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <string>

namespace sys {

pid_t gettid();
uint64_t now_ns(clockid_t clock);
// Writes all of buf (retrying EINTR / short writes); false on error. Past
// RLIMIT_FSIZE it writes what fits and fails with EFBIG.
bool write_all(int fd, const void* buf, size_t n);
// The bytes a write at fd's offset may add under RLIMIT_FSIZE (SIZE_MAX
// when no limit applies). A write that starts at the limit raises SIGXFSZ,
// whose default kills the program: the shim's writes stop before it.
size_t fsize_room(int fd);
// RLIMIT_FSIZE is set.
bool fsize_limited();

// Copies n bytes of this process's memory from src (read_own) or to dst
// (write_own) without faulting where it is not mapped or not writable:
// false with errno EFAULT then, as the kernel's answer would be; false with
// the call's own errno where it is refused (a seccomp filter, a
// container's policy): the caller cannot know, and must not touch the
// memory itself. Signal-safe; errno kept on success.
bool read_own(const void* src, void* dst, size_t n);
bool write_own(void* dst, const void* src, size_t n);

// Writes v in decimal at out (no terminating NUL) and returns the end:
// a number into a path or a line where snprintf may not run (a signal
// handler). out must have room for 20 digits.
char* put_uint(char* out, unsigned long v);

// Futex on a 32-bit word: wait while *word == expect, at most timeout_ns.
void futex_wait(volatile uint32_t* word, uint32_t expect, uint64_t timeout_ns);
void futex_wake(volatile uint32_t* word);

// Whether RLIMIT_AS or RLIMIT_DATA is finite (ulimit -v, -d): then what the
// shim reserves or its allocator keeps mapped counts against the program.
// A raw system call: safe before libc's own set-up.
bool memory_limited();

// Marks a private anonymous mapping zero-filled in fork children
// (MADV_WIPEONFORK); false where the kernel does not know it, or advice is
// forbidden. errno kept.
bool wipe_on_fork(void* p, size_t bytes);

// The shim's own madvise: false, without the call, once a seccomp filter
// the program put in kills it (sandbox.h forbids advice before the filter
// is in force; the call would end the program). Every use is an economy
// the shim can do without. errno kept. jemalloc's calls wait on the same
// gate (heap_advice.cc).
bool advise(void* p, size_t bytes, int advice);
void forbid_advice();
bool advice_forbidden();
// Zeroed memory of the shim's own (tables, slots): private, anonymous,
// reserving no swap, out of core dumps (dont_dump); null if it cannot be
// mapped.
void* map_own(size_t bytes);
// Leaves memory of the shim's own out of core dumps (MADV_DONTDUMP, whole
// pages): the kernel writes a core in address order and stops at
// RLIMIT_CORE, and the shim's tables and buffers, mapped below the
// program's stack, took the room the stack needed (a core of 1 MiB had no
// backtrace). Where advice is forbidden or refused they stay in. Signal-safe.
void dont_dump(void* p, size_t bytes);

// Field n of /proc/PID/stat as proc(5) numbers them (3: the state, 20:
// num_threads, 22: starttime; pid 0: this process), into out; false if it
// cannot be read or does not fit.
bool stat_field(pid_t pid, int n, char* out, size_t cap);
// Whether the calling thread is the process's only one (num_threads of
// /proc/self/stat); false when that cannot be read.
bool single_threaded();

// A free descriptor number at the top of RLIMIT_NOFILE, for one the shim
// keeps (stderr's duplicate, the root): a program's own numbers rarely reach
// there (one that closes 3-1023 and opens 600 files gets the numbers it
// expects).
int top_free_fd();

// Ends the process with the kernel's exit_group, not through syscall(),
// which the shim interposes (a program's exit_group there is a stop).
[[noreturn]] void exit_group(int status);

// For a stop (finish.cc): a program that has used every descriptor its soft
// RLIMIT_NOFILE allows leaves none for the stop's few (a temporary per
// file, /proc's maps, the libraries' ELF files), and every profile is lost.
// Where the top 16 numbers under the soft limit are all taken, the soft
// limit is raised by 64, up to the hard one, while this lives, and put
// back after, or by give_back() (a stop given up: the program goes on, or
// execs, while the stop's thread may still run). Not under a seccomp
// filter (allowed: false): setting a limit is no call the stop probes.
// Raw system calls.
class DescriptorRoom {
 public:
  explicit DescriptorRoom(bool allowed);
  ~DescriptorRoom() { give_back(); }
  DescriptorRoom(const DescriptorRoom&) = delete;
  DescriptorRoom& operator=(const DescriptorRoom&) = delete;
  static void give_back();
};

// A whole file (a /proc file, say), "" if it cannot be opened; an absolute
// path from the root the program started with (fsroot.h). Not
// signal-safe; its buffer is on the heap, so it suits a small stack.
std::string read_file(const char* path);

// "/proc/thread-self/LEAF": after pthread_exit from main, /proc/self is the
// exited leader. Where /proc/thread-self is not the program's own, "/proc/self/LEAF":
// an emulator (qemu-user) serves only /proc/self (and /proc/PID) as the
// program's view, and /proc/thread-self as its own process's (its maps,
// its exe), which the shim must not read as the program's. Decided once:
// the two exe links differ. Not signal-safe.
std::string proc_thread_self(const char* leaf);

}  // namespace sys
