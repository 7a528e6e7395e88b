// stop_safety: programs for "the stop never changes what the
// program does": each mode does one thing a stop must survive, and prints on
// stdout only what does not depend on the shim (so a test can compare stdout
// with a plain run byte for byte).
//
// usage: stop_safety MODE ...
//   oom exit|return [KB]
//                     allocates until malloc returns NULL (64 MiB blocks,
//                     halving down to 16 bytes, all kept), prints "oom: exhausted",
//                     then exit(0) / returns 0. Run it under RLIMIT_AS. KB: maps
//                     that much first and unmaps it just before the end, so
//                     the stop finds a little address space (a stack, some
//                     heap) and runs out later.
//   slow N HOW STATUS [handler] [throttle=FILE] [nap=MS]
//                     makes 2^N live 16-byte blocks, each from its own call
//                     stack (with PROFILE_HEAP_SAMPLE=1 a heap profile of 2^N
//                     stacks), prints "slow: t_stop=<CLOCK_MONOTONIC ns>" (a
//                     test measures the stop from it), then stops by HOW:
//                     exit, return, _exit, term (raise(SIGTERM)), with STATUS.
//                     "handler": a SIGPIPE handler counts, and an atexit
//                     handler prints the count. "nap=MS": sleeps MS ms
//                     after the blocks (time for snapshots). "throttle=FILE": just before
//                     the stop, writes its pid to FILE (a cgroup's
//                     cgroup.procs with a small CPU quota), so that the stop
//                     runs on a sliver of CPU and takes seconds, however fast
//                     the machine. Writes nothing to stderr.
//   fds [top]         closes fds 3-1023, points stderr at /dev/null, opens 600
//                     files (/dev/null, /proc/self/stat, its own executable in
//                     turn); with "top", also moves one to the top of
//                     RLIMIT_NOFILE with dup2 and closes fd 2; then at exit and in an atexit
//                     handler (after the stop) checks that every one is still
//                     open and still the file it opened, with ~0.3 s of CPU
//                     in between (the sampler walks its stack meanwhile).
//                     Prints the number its first open() returned, then
//                     "fds WHEN: N of N intact" twice, or which were lost.
//   execvp N          N calls of execvp, N of execvpe and N of execlp of a
//                     command found nowhere on PATH, N of execvp of one that is on
//                     PATH but not executable (EACCES): prints each call's
//                     errno once ("execvp: ENOENT"), and the time they took on
//                     stderr ("stop_safety: exec loop NS ns"). Exits 0.
//   execfail2 PATH    two threads call execve(PATH) at the same instant (PATH:
//                     an executable file that is no program, ENOEXEC); then
//                     burns ~0.3 s of CPU in after_failed_burn and holds 10 MiB
//                     at after_failed_hold; prints both errnos,
//                     "truth burn cpu_ns=N" and "truth exec overlap=0|1"
//                     (whether the two calls were in execv at once), exits 0.
//   umask FILE        creates FILE with mode 0666 and prints its mode and the
//                     umask the program sees; exits 0.
//   pidreuse PROG     in a new pid namespace: its init (pid 1) forks a child
//                     (pid 2) that runs PROG "child A" and exits; then sets
//                     ns_last_pid to 1 and forks again, so the second child
//                     gets pid 2 too, and runs PROG "child B". Prints the pids.
//                     Exits 0 (77 if no namespace can be made).
//   child TAG         (pidreuse's children) burns ~50 ms in child_burn, holds
//                     4 MiB at child_hold, exits 0.
//   ro DIR            remounts the file system at DIR read-only, exits 5.
//   hold N SIZE       holds N blocks of SIZE bytes (allocated in hold_blocks)
//                     at its end, returns 0; prints "truth hold bytes=B"
//                     with B the usable size of the blocks and of the array
//                     of pointers to them. For the heap
//                     summary and for measuring what sampling costs.
//   error             glibc's error(): one message with arguments and an
//                     errno, then error(3, 0, ...), which exits with 3.
#define _GNU_SOURCE
#include <errno.h>
#include <error.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static unsigned long long mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static unsigned long long thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

__attribute__((noinline, noclone)) void spin(unsigned long n) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < n; i++) {
    x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
}

static void say(const char* s) {
  if (write(1, s, strlen(s)) < 0) _exit(99);
}

// --- oom ---------------------------------------------------------------------

static int oom(const char* how, long reserve_kb) {
  void* reserve = NULL;
  if (reserve_kb > 0) {
    reserve = mmap(NULL, (size_t)reserve_kb << 10, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (reserve == MAP_FAILED) return 1;
  }
  void* head = NULL;
  for (size_t n = 64u << 20; n >= 16;) {
    void** p = malloc(n);
    if (!p) {
      n /= 2;
      continue;
    }
    *p = head;  // kept: the heap stays exhausted until the end
    head = p;
  }
  say("oom: exhausted\n");
  sink = (unsigned long)head;
  if (reserve) munmap(reserve, (size_t)reserve_kb << 10);
  if (!strcmp(how, "exit")) exit(0);
  return 0;
}

// --- slow --------------------------------------------------------------------

void* volatile* blocks;
static size_t nblocks;

void node(int depth, unsigned long bits);
// Two distinct callers per level: each path through them is a distinct stack.
__attribute__((noinline, noclone)) void left(int depth, unsigned long bits) {
  node(depth, bits);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline, noclone)) void right(int depth, unsigned long bits) {
  node(depth, bits);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline, noclone)) void node(int depth, unsigned long bits) {
  if (depth == 0) {
    blocks[nblocks++] = malloc(16);
    return;
  }
  if (bits & 1)
    left(depth - 1, bits >> 1);
  else
    right(depth - 1, bits >> 1);
  __asm__ volatile("" ::: "memory");
}

static volatile sig_atomic_t pipe_signals;
static void on_sigpipe(int sig) { pipe_signals++; }
static void print_pipe_signals(void) {
  char b[64];
  snprintf(b, sizeof b, "slow: SIGPIPE handler ran %d times\n", (int)pipe_signals);
  say(b);
}

static const char* throttle;
static int nap_ms;

static int slow(int n, const char* how, int status, int handler) {
  if (handler) {
    signal(SIGPIPE, on_sigpipe);
    atexit(print_pipe_signals);
  }
  blocks = malloc(sizeof(void*) << n);
  for (unsigned long b = 0; b < (1ul << n); b++) node(n, b);
  if (nap_ms) usleep((useconds_t)nap_ms * 1000);
  char buf[64];
  if (throttle) {
    int fd = open(throttle, O_WRONLY);
    snprintf(buf, sizeof buf, "%d", (int)getpid());
    if (fd < 0 || write(fd, buf, strlen(buf)) < 0) {
      perror(throttle);
      return 1;
    }
    close(fd);
  }
  snprintf(buf, sizeof buf, "slow: t_stop=%llu\n", mono_ns());
  say(buf);
  if (!strcmp(how, "exit")) exit(status);
  if (!strcmp(how, "_exit")) _exit(status);
  if (!strcmp(how, "term")) raise(SIGTERM);
  return status;
}

// --- fds ---------------------------------------------------------------------

#define NFDS 600
static int fds[NFDS];
static dev_t fd_dev[NFDS];
static ino_t fd_ino[NFDS];

static void check_fds(const char* when) {
  int intact = 0;
  char lost[4096] = "";
  for (int i = 0; i < NFDS; i++) {
    struct stat st;
    if (fstat(fds[i], &st) == 0 && st.st_dev == fd_dev[i] && st.st_ino == fd_ino[i]) {
      intact++;
    } else if (strlen(lost) < sizeof lost - 16) {
      snprintf(lost + strlen(lost), sizeof lost - strlen(lost), " %d", fds[i]);
    }
  }
  char b[4200];
  snprintf(b, sizeof b, "fds %s: %d of %d intact%s%s\n", when, intact, NFDS, *lost ? "; lost:" : "", lost);
  say(b);
}

static void check_fds_atexit(void) { check_fds("after the stop"); }

static int fds_mode(int top_too) {
  int first = open("/dev/null", O_RDONLY);
  char b[64];
  snprintf(b, sizeof b, "fds: first open() is fd %d\n", first);
  say(b);
  for (int fd = 3; fd < 1024; fd++) close(fd);
  int devnull = open("/dev/null", O_WRONLY);
  dup2(devnull, 2);
  close(devnull);
  const char* paths[] = {"/dev/null", "/proc/self/stat", "/proc/self/exe"};
  for (int i = 0; i < NFDS; i++) {
    fds[i] = open(paths[i % 3], O_RDONLY);
    if (fds[i] < 0) {
      perror("open");
      return 1;
    }
  }
  // One of them at the very top of the limit, where a duplicate of the
  // shim's would sit; then stderr closed again.
  if (top_too) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    int top = (int)(rl.rlim_cur > 4096 ? 4095 : rl.rlim_cur - 1);
    if (dup2(fds[NFDS - 1], top) == top) {
      close(fds[NFDS - 1]);
      fds[NFDS - 1] = top;
    }
    close(2);
  }
  for (int i = 0; i < NFDS; i++) {
    struct stat st;
    fstat(fds[i], &st);
    fd_dev[i] = st.st_dev;
    fd_ino[i] = st.st_ino;
  }
  atexit(check_fds_atexit);
  spin(100000000UL);
  check_fds("before exit");
  exit(0);
}

// --- execvp ------------------------------------------------------------------

static const char* errname(int e) {
  switch (e) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case ENOEXEC: return "ENOEXEC";
    case ENOTDIR: return "ENOTDIR";
    default: return "other";
  }
}

static int execvp_mode(int n) {
  char missing[] = "profshim-no-such-command-4242";
  char* argv[] = {missing, NULL};
  char* env[] = {"PATH=/usr/bin:/bin", NULL};
  // A file on PATH that is not executable: its own directory first in PATH.
  char dir[] = "/tmp/stop_safety.XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char noexec[256];
  snprintf(noexec, sizeof noexec, "%s/notexec", dir);
  int fd = open(noexec, O_WRONLY | O_CREAT, 0644);
  if (fd < 0) return 1;
  close(fd);
  char path[512];
  snprintf(path, sizeof path, "PATH=%s:%s", dir, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  putenv(path);
  char* argv2[] = {"notexec", NULL};
  int e1 = 0, e2 = 0, e3 = 0, e4 = 0;
  unsigned long long t0 = mono_ns();
  for (int i = 0; i < n; i++) {
    execvp(missing, argv);
    e1 = errno;
    execvpe(missing, argv, env);
    e2 = errno;
    execlp(missing, missing, (char*)NULL);
    e3 = errno;
    execvp("notexec", argv2);
    e4 = errno;
  }
  unsigned long long t1 = mono_ns();
  unlink(noexec);
  rmdir(dir);
  printf("execvp: %s\nexecvpe: %s\nexeclp: %s\nexecvp notexec: %s\n", errname(e1), errname(e2), errname(e3),
         errname(e4));
  fprintf(stderr, "stop_safety: exec loop %llu ns\n", t1 - t0);
  return 0;
}

// --- execfail2 ---------------------------------------------------------------

static const char* exec_path;
static volatile int ready, go;
static int exec_errno[2];
static unsigned long long exec_span[2][2];  // each call's entry and return

static void* exec_thread(void* arg) {
  long k = (long)arg;
  __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
  while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) {
  }
  char* argv[] = {(char*)exec_path, NULL};
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  execv(exec_path, argv);
  exec_errno[k] = errno;
  clock_gettime(CLOCK_MONOTONIC, &b);
  exec_span[k][0] = a.tv_sec * 1000000000ull + a.tv_nsec;
  exec_span[k][1] = b.tv_sec * 1000000000ull + b.tv_nsec;
  return NULL;
}

__attribute__((noinline, noclone)) void after_failed_burn(void) { spin(150000000UL); }
char* held;
__attribute__((noinline, noclone)) void after_failed_hold(void) {
  held = malloc(10u << 20);
  memset(held, 1, 10u << 20);
}

static int execfail2(const char* path) {
  exec_path = path;
  pthread_t t[2];
  for (long k = 0; k < 2; k++) pthread_create(&t[k], NULL, exec_thread, (void*)k);
  while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) < 2) {
  }
  __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
  for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
  printf("execfail2: %s %s\n", errname(exec_errno[0]), errname(exec_errno[1]));
  unsigned long long c0 = thread_cpu_ns();
  after_failed_burn();
  unsigned long long c1 = thread_cpu_ns();
  after_failed_hold();
  fprintf(stderr, "truth burn cpu_ns=%llu\n", c1 - c0);
  // Whether the two calls were in execv at once: on a loaded machine one
  // thread can enter only after the other's call has failed and returned.
  int overlap = exec_span[0][0] < exec_span[1][1] && exec_span[1][0] < exec_span[0][1];
  fprintf(stderr, "truth exec overlap=%d\n", overlap);
  return 0;
}

// --- umask -------------------------------------------------------------------

static int umask_mode(const char* file) {
  mode_t m = umask(0);
  umask(m);
  int fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0666);
  if (fd < 0) {
    perror("open");
    return 1;
  }
  close(fd);
  struct stat st;
  stat(file, &st);
  printf("umask: %03o, a file made 0666 is %03o\n", (unsigned)m, (unsigned)(st.st_mode & 07777));
  return 0;
}

// --- pidreuse ----------------------------------------------------------------

__attribute__((noinline, noclone)) void child_burn(void) { spin(30000000UL); }
__attribute__((noinline, noclone)) void child_hold(void) {
  held = malloc(4u << 20);
  memset(held, 1, 4u << 20);
}

static pid_t run_child(const char* prog, const char* tag) {
  pid_t p = fork();
  if (p == 0) {
    execl(prog, prog, "child", tag, (char*)NULL);
    _exit(127);
  }
  int st;
  waitpid(p, &st, 0);
  return p;
}

static int pidreuse(const char* prog) {
  if (unshare(CLONE_NEWPID) != 0) {
    perror("unshare(CLONE_NEWPID)");
    return 77;
  }
  pid_t init = fork();
  if (init < 0) return 1;
  if (init == 0) {
    // pid 1 of the new namespace: nothing else forks here, so pids are ours.
    pid_t a = run_child(prog, "A");
    int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY);
    char b[32];
    snprintf(b, sizeof b, "%d", (int)a - 1);
    if (fd < 0 || write(fd, b, strlen(b)) < 0) {
      perror("ns_last_pid");
      _exit(77);
    }
    close(fd);
    pid_t bpid = run_child(prog, "B");
    printf("pidreuse: child A pid %d, child B pid %d\n", (int)a, (int)bpid);
    exit(a == bpid ? 0 : 78);
  }
  int st;
  waitpid(init, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static int child(const char* tag) {
  child_burn();
  child_hold();
  return 0;
}

// --- ro ----------------------------------------------------------------------

static int ro(const char* dir) {
  if (mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, NULL) != 0) {
    perror("remount read-only");
    return 1;
  }
  say("ro: remounted read-only\n");
  exit(5);
}

void** held_blocks;
__attribute__((noinline, noclone)) void hold_blocks(long n, size_t size) {
  held_blocks = malloc(sizeof(void*) * (size_t)n);
  for (long i = 0; i < n; i++) {
    held_blocks[i] = malloc(size);
    memset(held_blocks[i], 1, size);
  }
}

static int hold_mode(long n, size_t size) {
  hold_blocks(n, size);
  size_t usable = malloc_usable_size(held_blocks);  // the array too: it is held
  for (long i = 0; i < n; i++) usable += malloc_usable_size(held_blocks[i]);
  printf("truth hold bytes=%zu\n", usable);
  return 0;
}

static int error_mode(void) {
  printf("error: stdout before\n");  // error() flushes stdout first
  error(0, EACCES, "a message with %s and %d", "arguments", 42);
  errno = ENOENT;
  error(0, 0, "%%m is %m");
  error(3, 0, "and then exit(%d)", 3);
  return 1;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "error")) return error_mode();
  if (!strcmp(mode, "hold") && argc > 3) return hold_mode(atol(argv[2]), (size_t)atol(argv[3]));
  if (!strcmp(mode, "oom") && argc > 2) return oom(argv[2], argc > 3 ? atol(argv[3]) : 0);
  if (!strcmp(mode, "slow") && argc > 4) {
    int handler = 0;
    for (int i = 5; i < argc; i++) {
      if (!strcmp(argv[i], "handler")) handler = 1;
      if (!strncmp(argv[i], "throttle=", 9)) throttle = argv[i] + 9;
      if (!strncmp(argv[i], "nap=", 4)) nap_ms = atoi(argv[i] + 4);
    }
    return slow(atoi(argv[2]), argv[3], atoi(argv[4]), handler);
  }
  if (!strcmp(mode, "fds")) return fds_mode(argc > 2 && !strcmp(argv[2], "top"));
  if (!strcmp(mode, "execvp") && argc > 2) return execvp_mode(atoi(argv[2]));
  if (!strcmp(mode, "execfail2") && argc > 2) return execfail2(argv[2]);
  if (!strcmp(mode, "umask") && argc > 2) return umask_mode(argv[2]);
  if (!strcmp(mode, "pidreuse") && argc > 2) return pidreuse(argv[2]);
  if (!strcmp(mode, "child") && argc > 2) return child(argv[2]);
  if (!strcmp(mode, "ro") && argc > 2) return ro(argv[2]);
  fprintf(stderr, "usage: stop_safety oom|slow|fds|execvp|execfail2|umask|pidreuse|child|ro ...\n");
  return 2;
}
