// signals_view: prints what the program sees of its signal dispositions, and
// checks that its own handlers work, so that runs with and without the shim
// can be compared line for line.
//  - for each signal the shim may catch: sigaction(sig, NULL, &old) as
//    default / ignore / handler;
//  - signal(SIGUSR2, SIG_DFL) returns what was there;
//  - installs its own SIGTERM handler and raises SIGTERM: the handler runs;
//  - if SIGPIPE is ignored (inherited), a write to a closed pipe gives EPIPE.
// Exits 0.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct { int sig; const char* name; } kSignals[] = {
    {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},   {SIGHUP, "SIGHUP"},   {SIGQUIT, "SIGQUIT"},
    {SIGABRT, "SIGABRT"}, {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGILL, "SIGILL"},   {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGXCPU, "SIGXCPU"},
    {SIGXFSZ, "SIGXFSZ"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"},
};

static volatile sig_atomic_t got_term;
static void on_term(int sig) { got_term = sig; }

static const char* describe(void (*h)(int)) {
  if (h == SIG_DFL) return "default";
  if (h == SIG_IGN) return "ignore";
  return "handler";
}

int main(void) {
  for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; i++) {
    struct sigaction old;
    memset(&old, 0, sizeof old);
    if (sigaction(kSignals[i].sig, NULL, &old) != 0) {
      printf("%s: sigaction failed: %s\n", kSignals[i].name, strerror(errno));
      continue;
    }
    printf("%s: %s flags=%s\n", kSignals[i].name, describe(old.sa_handler),
           (old.sa_flags & SA_SIGINFO) ? "siginfo" : "plain");
  }
  void (*prev)(int) = signal(SIGUSR2, SIG_DFL);
  printf("signal(SIGUSR2) returned %s\n", describe(prev));

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  raise(SIGTERM);
  printf("own SIGTERM handler ran: %s\n", got_term == SIGTERM ? "yes" : "no");
  struct sigaction now;
  sigaction(SIGTERM, NULL, &now);
  printf("SIGTERM now: %s\n", now.sa_handler == on_term ? "own handler" : describe(now.sa_handler));

  struct sigaction pipe_sa;
  sigaction(SIGPIPE, NULL, &pipe_sa);
  if (pipe_sa.sa_handler == SIG_IGN) {
    int fds[2];
    if (pipe(fds) == 0) {
      close(fds[0]);
      ssize_t n = write(fds[1], "x", 1);
      printf("write to a closed pipe: %s\n", n < 0 && errno == EPIPE ? "EPIPE" : "something else");
      close(fds[1]);
    }
  }
  return 0;
}
