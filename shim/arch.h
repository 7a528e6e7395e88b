// arch: what the shim reads of the machine, one definition per target
// (x86-64, aarch64): an interrupted context's registers, the thread
// pointer, a spin's pause. Every other file asks here, so that a port is
// this file and the assembly (stack.cc, handler_jump.cc, hooks_sandbox.cc,
// go_runtime.cc), not a hunt through the shim. Signal-safe, pure.
#pragma once
#include <signal.h>
#include <stdint.h>
#include <ucontext.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "arch: only x86_64 and aarch64 are supported"
#endif

namespace arch {

inline mcontext_t& mc(void* uc) { return static_cast<ucontext_t*>(uc)->uc_mcontext; }

// The interrupted instruction.
inline uint64_t pc(void* uc) {
#if defined(__x86_64__)
  return uint64_t(mc(uc).gregs[REG_RIP]);
#else
  return uint64_t(mc(uc).pc);
#endif
}

// The interrupted stack pointer.
inline uintptr_t sp(void* uc) {
#if defined(__x86_64__)
  return uintptr_t(mc(uc).gregs[REG_RSP]);
#else
  return uintptr_t(mc(uc).sp);
#endif
}

// The interrupted frame pointer (rbp; x29, the AAPCS64 frame record's):
// both point at {the caller's frame pointer, the return address}.
inline uintptr_t fp(void* uc) {
#if defined(__x86_64__)
  return uintptr_t(mc(uc).gregs[REG_RBP]);
#else
  return uintptr_t(mc(uc).regs[29]);
#endif
}

// A trapped system call's result, as the kernel would have returned it.
inline void set_syscall_result(void* uc, long r) {
#if defined(__x86_64__)
  mc(uc).gregs[REG_RAX] = r;
#else
  mc(uc).regs[0] = uint64_t(r);
#endif
}

// The ABI's red zone below the stack pointer that a signal frame skips
// (System V x86-64: 128 bytes; AAPCS64 has none).
#if defined(__x86_64__)
constexpr uintptr_t kRedZone = 128;
#else
constexpr uintptr_t kRedZone = 0;
#endif

// The thread pointer (%fs:0; tpidr_el0), the base static TLS offsets are
// taken from.
inline uintptr_t thread_pointer() {
  uintptr_t tp;
#if defined(__x86_64__)
  __asm__("movq %%fs:0, %0" : "=r"(tp));
#else
  __asm__("mrs %0, tpidr_el0" : "=r"(tp));
#endif
  return tp;
}

// One turn of a spin-wait.
inline void relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#else
  __asm__ volatile("yield");
#endif
}

// The time-stamp counter, the wait profile's clock on x86-64 where the
// kernel trusts it for its own. aarch64 has none here (kHasTsc false):
// CLOCK_MONOTONIC through the vDSO, which reads cntvct_el0 itself.
#if defined(__x86_64__)
constexpr bool kHasTsc = true;
inline uint64_t tsc() { return __rdtsc(); }
#else
constexpr bool kHasTsc = false;
inline uint64_t tsc() { return 0; }
#endif

}  // namespace arch
