// detach: programs that call setsid, to compare runs with and without the
// shim.
// usage: detach stale_dup       forks; the child closes fd 2 (the profiling
//                               shim keeps a duplicate of it then), closes
//                               that duplicate's number behind libc's back,
//                               puts a copy of stdin there, calls setsid and
//                               reads stdin through the copy to stdout; exit
//                               1 if the copy was closed under it.
//        detach root PIDFILE    Erlang's erl_child_setup: forks a child that
//                               execs this program as `detach helper` with
//                               the read end of a pipe, burns CPU in
//                               root_work and exits 0 without waiting.
//        detach helper PIDFILE ROOTPID FD
//                               calls setsid, writes its pid to PIDFILE,
//                               blocks on FD until the root's end closes it
//                               and exits once ROOTPID has been reaped too,
//                               as erl_child_setup ends when BEAM has.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline, noclone)) void root_work(void) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < 200000000UL; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
  sink = x;
}

// The shim's duplicate, if any: a descriptor above 2 open on stderr's file.
static int find_dup(dev_t dev, ino_t ino) {
  int found = -1;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  for (struct dirent* e; (e = readdir(d));) {
    int fd = atoi(e->d_name);
    struct stat st;
    if (fd > 2 && fd != dirfd(d) && fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino) found = fd;
  }
  closedir(d);
  return found;
}

static int stale_dup(void) {
  struct stat st;
  if (fstat(2, &st) != 0) return 2;
  close(2);
  int n = find_dup(st.st_dev, st.st_ino);
  if (n < 0) n = 1000;  // no duplicate (plain, inert): the same steps at a number of our own
  // Raw calls: nothing the shim sees, as a library's own close loop or a
  // runtime's syscalls would do.
  syscall(SYS_close, n);
  if (syscall(SYS_dup3, 0, n, 0) != n) return 2;
  if (setsid() < 0) return 2;
  char buf[256];
  ssize_t r = read(n, buf, sizeof buf);
  if (r < 0) return 1;  // closed under us
  if (r > 0 && write(1, buf, (size_t)r) != r) return 2;
  return 0;
}

static int write_pidfile(const char* path) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "w");
  if (!f) return -1;
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  return rename(tmp, path);
}

int main(int argc, char** argv) {
  if (argc >= 2 && !strcmp(argv[1], "stale_dup")) {
    // A child, as a session leader cannot setsid.
    pid_t c = fork();
    if (c == 0) _exit(stale_dup());
    int st;
    if (c < 0 || waitpid(c, &st, 0) != c) return 2;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
  }
  if (argc == 3 && !strcmp(argv[1], "root")) {
    char root[32], fd[32];
    int p[2];
    if (pipe(p) != 0) return 2;
    snprintf(root, sizeof root, "%d", (int)getpid());
    snprintf(fd, sizeof fd, "%d", p[0]);
    pid_t c = fork();
    if (c == 0) {
      close(p[1]);
      execl("/proc/self/exe", "detach", "helper", argv[2], root, fd, (char*)NULL);
      _exit(127);
    }
    if (c < 0) return 2;
    close(p[0]);
    root_work();
    return 0;
  }
  if (argc == 5 && !strcmp(argv[1], "helper")) {
    pid_t root = (pid_t)atoi(argv[3]);
    if (setsid() < 0 || write_pidfile(argv[2]) != 0) return 2;
    char c;
    while (read(atoi(argv[4]), &c, 1) > 0) {
    }
    for (int i = 0; i < 30000 && !(kill(root, 0) != 0 && errno == ESRCH); i++) usleep(1000);
    return 0;
  }
  fprintf(stderr, "usage: detach stale_dup | root PIDFILE | helper PIDFILE ROOTPID FD\n");
  return 2;
}
