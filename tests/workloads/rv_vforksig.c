// Regression (found in review): a vfork child that changes a disposition must
// not change what the parent's sigaction() reports (they share memory, not
// their signal tables). See tests/integration/test_regressions.py.
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
  pid_t p = vfork();
  if (p == 0) {
    signal(SIGPIPE, SIG_IGN);
    _exit(0);
  }
  int st;
  waitpid(p, &st, 0);
  struct sigaction old;
  sigaction(SIGPIPE, NULL, &old);
  printf("parent SIGPIPE %s\n", old.sa_handler == SIG_DFL ? "default" : old.sa_handler == SIG_IGN ? "ignored" : "handled");
  return 0;
}
