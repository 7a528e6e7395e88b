// seccomp_bpf: runs a seccomp filter (classic BPF, as the program hands it to
// the kernel) on one system call, to learn ahead what the kernel will answer
// the shim's own calls once the filter is in place. A filter cannot be read
// back from the kernel without privilege; the shim sees it only as it goes
// in (sandbox.h), and evaluates it then.
//
// The instruction set is the one the kernel accepts for seccomp
// (seccomp_check_filter): loads from struct seccomp_data, the scratch
// memory, immediates; ALU; jumps; returns. An instruction outside it, a jump
// past the end or a load outside seccomp_data makes the evaluation fail,
// which callers read as "not allowed": the kernel would have refused the
// filter anyway.
#pragma once
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>

namespace seccomp_bpf {

// The filter's return value for *data (SECCOMP_RET_* with its data bits), or
// kInvalid. Pure: no system call, no allocation.
constexpr uint32_t kInvalid = 0xffffffffu;
uint32_t run(const struct sock_filter* prog, unsigned len, const struct seccomp_data& data);

// Whether the kernel would take the filter (its checks, as far as they are
// about the instructions: known codes, loads inside seccomp_data, jumps
// inside the filter, a return last). Pure.
bool valid(const struct sock_filter* prog, unsigned len);

// The kernel's action for a return value: ALLOW and LOG let the call run;
// ERRNO and TRACE (with no tracer: ENOSYS) make it fail; the others (KILL_*,
// TRAP's SIGSYS, USER_NOTIF's supervisor, and kInvalid) end the process or
// hand the call to someone else.
enum class Outcome { kRuns, kFails, kKills };
Outcome outcome(uint32_t ret);

}  // namespace seccomp_bpf
