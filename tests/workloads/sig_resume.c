// sig_resume: a program's own SIGILL and SIGSEGV handlers that do real work
// and resume the interrupted code, as a JIT's or a VM's guard-page handler
// does. trap_ill begins with ud2 and trap_segv with a load from address 0;
// each handler burns CPU in handler_burn, steps over the faulting instruction
// and returns, so trap_* go on and return to main. Each trap_* function
// follows right after a one-byte prev_* function: the faulting address minus
// one (a return address's rule) lies in prev_*, so a profile that reads the
// interrupted frame as a call's return names prev_* instead of trap_*.
// usage: sig_resume SECONDS   (handler CPU to burn in all: half in SIGILL's, then half in SIGSEGV's)
// stdout: "truth ill cpu_ns=C traps=N", "truth segv cpu_ns=C traps=N" (the
//         handlers' CPU by the thread's clock, and how many traps ran).
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

// In assembly, so that trap_* start exactly at the faulting instruction and
// prev_* end exactly where trap_* begin; CFI lets an unwinder step out.
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".globl prev_ill\n.type prev_ill,@function\nprev_ill:\n.cfi_startproc\n  ret\n.cfi_endproc\n"
    ".size prev_ill,.-prev_ill\n"
    ".globl trap_ill\n.type trap_ill,@function\ntrap_ill:\n.cfi_startproc\n  ud2\n  ret\n.cfi_endproc\n"
    ".size trap_ill,.-trap_ill\n"
    ".p2align 4\n"
    ".globl prev_segv\n.type prev_segv,@function\nprev_segv:\n.cfi_startproc\n  ret\n.cfi_endproc\n"
    ".size prev_segv,.-prev_segv\n"
    ".globl trap_segv\n.type trap_segv,@function\ntrap_segv:\n.cfi_startproc\n  movl 0, %eax\n  ret\n"
    ".cfi_endproc\n.size trap_segv,.-trap_segv\n");
void prev_ill(void);
void trap_ill(void);
void prev_segv(void);
void trap_segv(void);

static volatile unsigned long sink;
static long long ill_ns, segv_ns;
static int ill_traps, segv_traps;
static long long burn_each_ns = 4000000;  // a handler's CPU per trap: about a kernel tick

static long long thread_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline, noclone)) long long handler_burn(void) {
  long long t0 = thread_ns(), t;
  unsigned long x = sink;
  while ((t = thread_ns()) - t0 < burn_each_ns) {
    for (int i = 0; i < 2000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
  }
  return t - t0;
}

// Steps over the faulting instruction of the expected function, or dies.
static void resume_after(void* uc, void (*fn)(void), long len) {
  greg_t* rip = &((ucontext_t*)uc)->uc_mcontext.gregs[REG_RIP];
  if (*rip != (greg_t)fn) {
    static const char msg[] = "sig_resume: fault at an unexpected address\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
  }
  *rip += len;
}

__attribute__((noinline, noclone)) void on_sigill(int sig, siginfo_t* si, void* uc) {
  ill_ns += handler_burn();
  ill_traps++;
  resume_after(uc, trap_ill, 2);  // ud2
}

__attribute__((noinline, noclone)) void on_sigsegv(int sig, siginfo_t* si, void* uc) {
  segv_ns += handler_burn();
  segv_traps++;
  resume_after(uc, trap_segv, 7);  // mov 0x0,%eax: 8b 04 25 00 00 00 00
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: sig_resume SECONDS\n");
    return 2;
  }
  long long total = (long long)(atof(argv[1]) * 1e9);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sa.sa_sigaction = on_sigill;
  if (sigaction(SIGILL, &sa, NULL) != 0) return 1;
  sa.sa_sigaction = on_sigsegv;
  if (sigaction(SIGSEGV, &sa, NULL) != 0) return 1;
  // One kind after the other, not interleaved: a sample weighs the CPU
  // since the previous one, which would otherwise mix the two handlers'.
  while (ill_ns < total / 2) trap_ill();
  while (segv_ns < total / 2) trap_segv();
  printf("truth ill cpu_ns=%lld traps=%d\n", ill_ns, ill_traps);
  printf("truth segv cpu_ns=%lld traps=%d\n", segv_ns, segv_traps);
  return 0;
}
