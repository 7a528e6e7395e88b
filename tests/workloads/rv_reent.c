// Regression (found in review): see tests/integration/test_regressions.py.
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
static volatile long n;
static void ah(int s) { signal(SIGALRM, ah); n++; }   /* SysV re-arm idiom; sigaction/signal are AS-safe */
static void u(int s) {}
int main(void) {
  signal(SIGALRM, ah);
  struct itimerval it = {{0, 50}, {0, 50}};
  setitimer(ITIMER_REAL, &it, 0);
  for (long i = 0; i < 2000000; ++i) signal(SIGUSR1, u);
  printf("done, %ld alarms\n", n);
  return 0;
}
