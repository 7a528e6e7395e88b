// daemonize: a daemon started the classic ways, for which image takes NAME.
// usage: daemonize classic PIDFILE   fork; the parent exits 0 at once; the
//                                    child calls setsid, points its stdio at
//                                    /dev/null, writes its pid to PIDFILE,
//                                    burns CPU in daemon_work, exits 0.
//        daemonize double PIDFILE    the same with a second fork after
//                                    setsid (the intermediate exits): the
//                                    grandchild is the daemon.
//        daemonize server PIDFILE    classic, then the daemon forks six
//                                    workers at once, each its own session
//                                    (setsid), that exit together while it
//                                    lives (a PostgreSQL postmaster's
//                                    backends), waits for them,
//                                    then works and exits.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline, noclone)) void worker_work(void) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < 20000000UL; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
  sink = x;
}

__attribute__((noinline, noclone)) void daemon_work(void) {
  unsigned long x = sink;
  for (unsigned long i = 0; i < 300000000UL; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
  sink = x;
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  int dbl = !strcmp(argv[1], "double");
  const pid_t root = getpid();
  if (fork() != 0) return 0;
  setsid();
  const pid_t mid = getpid();
  if (dbl && fork() != 0) _exit(0);
  int fd = open("/dev/null", O_RDWR);
  dup2(fd, 0), dup2(fd, 1), dup2(fd, 2);
  if (fd > 2) close(fd);
  // The parent (and the intermediate) gone before the work, their stops
  // over: a daemon's life is longer than its parent's stop. A fixed 0.2 s
  // was not that on a loaded machine: the parent, still writing, was alive
  // at the daemon's stop, which then did not take NAME. At most 60 s.
  for (int i = 0; i < 6000 && (kill(root, 0) == 0 || (dbl && getppid() == mid)); i++) usleep(10000);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
  FILE* f = fopen(tmp, "w");
  if (!f) return 3;
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  rename(tmp, argv[2]);
  if (!strcmp(argv[1], "server")) {
    for (int i = 0; i < 6; i++)
      if (fork() == 0) {
        setsid();  // as PostgreSQL's backends do (InitPostmasterChild)
        worker_work();
        exit(0);
      }
    while (wait(NULL) > 0) {
    }
  }
  daemon_work();
  return 0;
}
