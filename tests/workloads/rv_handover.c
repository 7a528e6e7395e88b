// Regression (found in review): see tests/integration/test_regressions.py.
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
static volatile int hits, timer_hits;
static void h(int s, siginfo_t* si, void* u) { hits++; if (si->si_code == SI_TIMER) timer_hits++; }
static void burn(void) { volatile unsigned long x = 0; for (unsigned long i = 0; i < 400000000ul; ++i) x += i; }
int main(void) {
  struct sigaction sa; memset(&sa, 0, sizeof sa); sa.sa_sigaction = h; sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGRTMAX - 4, &sa, 0);
  burn();
  printf("parent: hits=%d timer=%d\n", hits, timer_hits); fflush(stdout);
  pid_t p = fork();
  if (p == 0) { burn(); printf("child: hits=%d timer=%d\n", hits, timer_hits); fflush(stdout); _exit(0); }
  waitpid(p, 0, 0);
  char* argv[] = {"/nonexistent-but-runnable?", 0};
  execv("/etc/hostname", argv);  /* runnable()? not X_OK -> no stop */
  execv("/bin/true-not-there", argv);
  return 0;
}
