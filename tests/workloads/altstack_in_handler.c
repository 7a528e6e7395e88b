/* altstack_in_handler: a SIGUSR1 handler sets an alternate stack of the
 * program's own (the kernel puts back, at the handler's return, the one it
 * saved on entry), then an SA_ONSTACK handler for SIGUSR2 runs. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

static char mine[65536];
static volatile sig_atomic_t got;

static void set_stack(int sig) {
  stack_t ss = {mine, 0, sizeof mine};
  sigaltstack(&ss, NULL);
  (void)sig;
}

static void on_stack(int sig) { got = sig; }

int main(void) {
  signal(SIGUSR1, set_stack);
  raise(SIGUSR1);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stack;
  sa.sa_flags = SA_ONSTACK;
  sigaction(SIGUSR2, &sa, NULL);
  raise(SIGUSR2);
  printf("survived, got %s\n", got == SIGUSR2 ? "SIGUSR2" : "nothing");
  return 0;
}
