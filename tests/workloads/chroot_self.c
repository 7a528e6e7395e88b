// chroot_self: a daemon that sandboxes itself. It computes and allocates,
// then chroot()s into the directory argv[1] (an empty one), chdir("/"),
// computes a little more and exits 0. Not root, it first enters a user
// namespace of its own, where it is (as `unshare -Ur` does).
// usage: chroot_self DIR [term|wait]
//   term: after the chroot it raises SIGTERM instead of exiting;
//   wait: it prints "waiting" and waits for a signal.
// stdout: "sum S" (S fixed) then "held 64 MiB"; exit 2 with a line on
// stderr if it cannot chroot.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile unsigned long g_sink;

// The program's work before its sandbox is what the CPU profile must name,
// from the files it had before.
static unsigned long work_before_chroot(void) {
  unsigned long x = 1;
  for (unsigned long i = 0; i < 400ul * 1000 * 1000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul + i;
  return x;
}

static unsigned long work_after_chroot(void) {
  unsigned long x = 3;
  for (unsigned long i = 0; i < 100ul * 1000 * 1000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul + i;
  return x;
}

static char* g_held[64];

static void hold_memory(void) {
  for (int i = 0; i < 64; ++i) {
    g_held[i] = malloc(1 << 20);
    memset(g_held[i], i, 1 << 20);
  }
}

static int write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

static void become_root_of_a_namespace(void) {
  char map[64];
  unsigned uid = getuid(), gid = getgid();
  if (unshare(CLONE_NEWUSER) != 0) {
    fprintf(stderr, "chroot_self: unshare(CLONE_NEWUSER): %s\n", strerror(errno));
    exit(2);
  }
  write_file("/proc/self/setgroups", "deny");
  snprintf(map, sizeof map, "0 %u 1", uid);
  if (write_file("/proc/self/uid_map", map) != 0) fprintf(stderr, "chroot_self: uid_map: %s\n", strerror(errno));
  snprintf(map, sizeof map, "0 %u 1", gid);
  if (write_file("/proc/self/gid_map", map) != 0) fprintf(stderr, "chroot_self: gid_map: %s\n", strerror(errno));
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: chroot_self DIR [term]\n");
    return 2;
  }
  unsigned long sum = work_before_chroot();
  hold_memory();
  if (geteuid() != 0) become_root_of_a_namespace();
  if (chroot(argv[1]) != 0 || chdir("/") != 0) {
    fprintf(stderr, "chroot_self: chroot %s: %s\n", argv[1], strerror(errno));
    return 2;
  }
  sum += work_after_chroot();
  g_sink = sum;
  printf("sum %lu\nheld %d MiB\n", sum % 1000, 64);
  fflush(stdout);
  if (argc > 2 && strcmp(argv[2], "term") == 0) raise(SIGTERM);
  if (argc > 2 && strcmp(argv[2], "wait") == 0) {
    printf("waiting\n");
    fflush(stdout);
    for (;;) pause();
  }
  return 0;
}
