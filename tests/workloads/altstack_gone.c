// altstack_gone: what Ruby does when it ends on a signal: it frees its
// alternate signal stack (still registered with the kernel), sets the
// signal's disposition back to the default and raises it. Here the stack is
// unmapped, so a handler that ran on it would fault at once.
// usage: altstack_gone [SIGNAL_NUMBER]   default SIGTERM
// stdout: one line before the signal; the process dies of the signal.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

int main(int argc, char** argv) {
  int sig = argc > 1 ? atoi(argv[1]) : SIGTERM;
  stack_t ss = {0};
  ss.ss_size = 16384;
  ss.ss_sp = mmap(NULL, ss.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ss.ss_sp == MAP_FAILED || sigaltstack(&ss, NULL) != 0) return 2;
  munmap(ss.ss_sp, ss.ss_size);
  signal(sig, SIG_DFL);
  printf("altstack_gone: raising %d\n", sig);
  fflush(stdout);
  raise(sig);
  return 1;
}
