// sym_dlclose: code that is gone by the stop. dlopen()s PLUGIN (built by the
// test from tests/workloads/plugins/sym_plugin.c), burns CPU in it, then
// dlclose()s it (and checks it is really unloaded) and does other work in
// the main executable before it exits.
// usage: sym_dlclose PLUGIN [seconds=S] [cycles=N] [stack=B] [alloc] [keep] [unlink] [jit-over]
//   seconds=S  CPU seconds to burn in the plugin (default 0.5, split over the
//              cycles); as much again in main_after_unload, after the dlclose
//   cycles=N   dlopen, burn, dlclose N times (default 1)
//   stack=B    do the cycles in a thread whose stack is B bytes (the shim's
//              dlclose hook must not need more than the program's thread has)
//   alloc      keep 64 blocks of 1 MiB that the plugin allocated
//   keep       dlopen the plugin a second time first, so that the dlclose
//              does not unload it (it stays mapped until the exit)
//   unlink     delete PLUGIN once it is unloaded: names at the stop cannot
//              come from the file then
//   jit-over   after the dlclose, map anonymous executable memory over the
//              plugin's old code range and run generated code (x86-64) at
//              its far end for S seconds
// stdout: per cycle "plugin spin=ADDR text=LO-HI" and "unloaded=0|1";
// "jit=LO-HI" (with jit-over); a checksum line.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline, noclone)) unsigned long main_after_unload(double seconds) {
  double t0 = cpu_seconds();
  unsigned long x = sink;
  while (cpu_seconds() - t0 < seconds)
    for (unsigned long i = 0; i < 1000000; i++) { x = x * 2862933555777941757UL + 3037000493UL; sink = x; }
  return x;
}

struct text { uintptr_t addr, lo, hi; };

// The executable PT_LOAD of the object holding t->addr.
static int find_text(struct dl_phdr_info* info, size_t size, void* arg) {
  struct text* t = arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && t->addr >= lo && t->addr < hi) {
      t->lo = lo, t->hi = hi;
      return 1;
    }
  }
  return 0;
}

// mov ecx, 100000; 1: dec ecx; jnz 1b; ret
static const unsigned char kLoop[] = {0xb9, 0xa0, 0x86, 0x01, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xc3};

__attribute__((noinline, noclone)) unsigned long run_jit(void (*fn)(void), double seconds) {
  double t0 = cpu_seconds();
  unsigned long calls = 0;
  while (cpu_seconds() - t0 < seconds) {
    for (int i = 0; i < 100; i++) fn();
    calls += 100;
  }
  return calls;
}

struct cycles {
  const char* path;
  double seconds;
  int cycles, alloc, keep;
  struct text t;
  unsigned long sum;
  void** kept;
  int failed;
};

static void* run_cycles(void* arg) {
  struct cycles* c = arg;
  for (int i = 0; i < c->cycles; i++) {
    void* h = dlopen(c->path, RTLD_NOW | RTLD_LOCAL);
    if (!h || (c->keep && !dlopen(c->path, RTLD_NOW | RTLD_LOCAL))) {
      fprintf(stderr, "sym_dlclose: %s\n", dlerror());
      c->failed = 1;
      return NULL;
    }
    unsigned long (*burn)(double) = (unsigned long (*)(double))dlsym(h, "sym_plugin_burn");
    void** (*alloc_fn)(int) = (void** (*)(int))dlsym(h, "sym_plugin_alloc");
    void* spin = dlsym(h, "sym_plugin_spin");
    if (!burn || !alloc_fn || !spin) {
      fprintf(stderr, "sym_dlclose: plugin lacks its functions\n");
      c->failed = 1;
      return NULL;
    }
    c->t.addr = (uintptr_t)spin;
    dl_iterate_phdr(find_text, &c->t);
    printf("plugin spin=%#lx text=%#lx-%#lx\n", (unsigned long)c->t.addr, (unsigned long)c->t.lo,
           (unsigned long)c->t.hi);
    c->sum += burn(c->seconds / c->cycles);
    if (c->alloc && !c->kept) c->kept = alloc_fn(64);
    if (dlclose(h) != 0) {
      fprintf(stderr, "sym_dlclose: dlclose: %s\n", dlerror());
      c->failed = 1;
      return NULL;
    }
    void* again = dlopen(c->path, RTLD_NOW | RTLD_NOLOAD);
    printf("unloaded=%d\n", again == NULL);
    if (again) dlclose(again);
    fflush(stdout);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: sym_dlclose PLUGIN [seconds=S] [cycles=N] [stack=B] [alloc] [keep] [unlink] [jit-over]\n");
    return 2;
  }
  double seconds = 0.5;
  int cycles = 1, alloc = 0, keep = 0, do_unlink = 0, jit_over = 0;
  long stack = 0;
  for (int i = 2; i < argc; i++) {
    if (strncmp(argv[i], "seconds=", 8) == 0) seconds = atof(argv[i] + 8);
    else if (strncmp(argv[i], "cycles=", 7) == 0) cycles = atoi(argv[i] + 7);
    else if (strncmp(argv[i], "stack=", 6) == 0) stack = atol(argv[i] + 6);
    else if (strcmp(argv[i], "alloc") == 0) alloc = 1;
    else if (strcmp(argv[i], "keep") == 0) keep = 1;
    else if (strcmp(argv[i], "unlink") == 0) do_unlink = 1;
    else if (strcmp(argv[i], "jit-over") == 0) jit_over = 1;
  }
  struct cycles cy = {argv[1], seconds, cycles, alloc, keep, {0, 0, 0}, 0, NULL, 0};
  if (stack) {
    pthread_attr_t attr;
    pthread_t th;
    pthread_attr_init(&attr);
    if (pthread_attr_setstacksize(&attr, stack) != 0 || pthread_create(&th, &attr, run_cycles, &cy) != 0) {
      fprintf(stderr, "sym_dlclose: cannot start a thread with a %ld-byte stack\n", stack);
      return 2;
    }
    pthread_join(th, NULL);
  } else {
    run_cycles(&cy);
  }
  if (cy.failed) return 2;
  struct text t = cy.t;
  unsigned long sum = cy.sum;
  void** kept = cy.kept;
  if (do_unlink && unlink(argv[1]) != 0) {
    perror("sym_dlclose: unlink");
    return 2;
  }
  if (jit_over) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = t.lo & ~(uintptr_t)(page - 1), hi = (t.hi + page - 1) & ~(uintptr_t)(page - 1);
    unsigned char* m = mmap((void*)lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (m == MAP_FAILED || (uintptr_t)m != lo) {
      perror("sym_dlclose: mmap over the plugin's code");
      return 2;
    }
    unsigned char* code = m + (hi - lo) - 64;
    memcpy(code, kLoop, sizeof kLoop);
    __builtin___clear_cache((char*)code, (char*)code + sizeof kLoop);
    printf("jit=%#lx-%#lx\n", (unsigned long)(uintptr_t)code, (unsigned long)(uintptr_t)code + sizeof kLoop);
    sum += run_jit((void (*)(void))code, seconds);
  }
  sum += main_after_unload(seconds);
  printf("sym_dlclose: checksum=%016lx kept=%d\n", sum, kept != NULL);
  return 0;
}
