/* landlock_self HOW: burns CPU, then puts itself in a Landlock sandbox as
 * xz 5.8 does (prctl(PR_SET_NO_NEW_PRIVS), then syscall() for the ruleset
 * and landlock_restrict_self), then burns CPU again and tries to make a
 * file in its working directory. HOW: strict (every file access of
 * Landlock's first ABI handled, no rule: nothing new may be opened), open
 * (the ruleset handles only executing files: the stop's files stay
 * allowed) or nodirs (only making directories is handled, as in xz 5.8's
 * sandbox of a file-to-file run: new files stay allowed, new directories
 * do not). Prints what the kernel answered, so a run under the shim can be
 * compared with a plain one; "no landlock" and status 0 where the kernel
 * has none. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Older headers (Debian 11's) lack Landlock: the kernel's numbers. */
#define LL_CREATE_RULESET 444
#define LL_RESTRICT_SELF 446
#define LL_CREATE_RULESET_VERSION 1u
#define LL_ACCESS_FS_EXECUTE 1ull
#define LL_ACCESS_FS_MAKE_DIR (1ull << 7)
#define LL_ACCESS_FS_ABI1 ((1ull << 13) - 1)

struct ruleset_attr {
  uint64_t handled_access_fs;
};

static volatile double sink;

__attribute__((noinline)) static void burn(long n) {
  double x = 0;
  for (long i = 0; i < n; i++) x += (double)i * 0.5;
  sink += x;
}

__attribute__((noinline)) static void before_sandbox(void) { burn(40000000); }
__attribute__((noinline)) static void in_sandbox(void) { burn(40000000); }

int main(int argc, char** argv) {
  const char* how = argc > 1 ? argv[1] : "open";
  const uint64_t handled = strcmp(how, "strict") == 0   ? LL_ACCESS_FS_ABI1
                           : strcmp(how, "nodirs") == 0 ? LL_ACCESS_FS_MAKE_DIR
                                                        : LL_ACCESS_FS_EXECUTE;
  if (syscall(LL_CREATE_RULESET, NULL, 0, LL_CREATE_RULESET_VERSION) < 0) {
    printf("no landlock (%s)\n", strerror(errno));
    return 0;
  }
  before_sandbox();
  struct ruleset_attr attr = {handled};
  const int fd = (int)syscall(LL_CREATE_RULESET, &attr, sizeof attr, 0);
  if (fd < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(LL_RESTRICT_SELF, fd, 0) != 0) {
    printf("sandbox failed (%s)\n", strerror(errno));
    return 1;
  }
  close(fd);
  in_sandbox();
  const int out = open("made-in-sandbox", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  printf("sandboxed; a new file: %s\n", out >= 0 ? "made" : strerror(errno));
  if (out >= 0) {
    close(out);
    unlink("made-in-sandbox");
  }
  return 0;
}
