// handler_exit: a program's SIGPROF handler that calls exit() wherever the
// signal lands, here most often inside malloc or free. main churns the heap
// (random sizes, random slots) until a one-shot CPU timer fires; the handler
// says whether the instruction it interrupted lies in the executable code of
// the object that serves malloc (with the shim preloaded, the shim), then
// calls exit(0). A stop made there would find the allocator half-way through
// on this thread: the shim must see it and refuse the stop.
// usage: handler_exit
// stderr: "truth interrupted=allocator" or "truth interrupted=other", then
//         whatever the stop prints.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

static void* slots[4096];
static uintptr_t exec_lo[8], exec_hi[8];
static int nexec;

// The executable segments of the object holding malloc (read before the
// timer runs: the handler only compares addresses, which is signal-safe).
static int find_malloc(struct dl_phdr_info* info, size_t size, void* arg) {
  uintptr_t m = (uintptr_t)arg;
  int hit = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && m >= lo && m < lo + ph->p_memsz) hit = 1;
  }
  for (int i = 0; hit && i < info->dlpi_phnum && nexec < 8; i++) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      exec_lo[nexec] = info->dlpi_addr + ph->p_vaddr;
      exec_hi[nexec++] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    }
  }
  return hit;
}

static void on_prof(int sig, siginfo_t* si, void* uc) {
  uintptr_t pc = (uintptr_t)((ucontext_t*)uc)->uc_mcontext.gregs[REG_RIP];
  int in = 0;
  for (int i = 0; i < nexec; i++) in |= pc >= exec_lo[i] && pc < exec_hi[i];
  static const char a[] = "truth interrupted=allocator\n", o[] = "truth interrupted=other\n";
  (void)!write(2, in ? a : o, in ? sizeof a - 1 : sizeof o - 1);
  exit(0);
}

int main(void) {
  dl_iterate_phdr(find_malloc, dlsym(RTLD_DEFAULT, "malloc"));
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_flags = SA_SIGINFO;
  sa.sa_sigaction = on_prof;
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval it = {{0, 0}, {0, 20000}};  // once, after 20 ms of CPU
  setitimer(ITIMER_PROF, &it, NULL);
  unsigned x = 1;
  for (;;) {
    x = x * 1103515245u + 12345u;
    unsigned i = (x >> 8) % 4096;
    free(slots[i]);
    slots[i] = malloc((x >> 16) % 3000 + 1);
  }
}
