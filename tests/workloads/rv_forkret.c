// Regression (found in review): see tests/integration/test_regressions.py.
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
static void* worker(void* a) {
  pid_t p = fork();
  if (p == 0) return NULL;      /* child: its only thread returns -> process should exit(0) */
  int st; waitpid(p, &st, 0);
  printf("child status %d exited=%d\n", st, WIFEXITED(st));
  return NULL;
}
int main(void) { pthread_t t; pthread_create(&t, 0, worker, 0); pthread_join(t, 0); return 0; }
