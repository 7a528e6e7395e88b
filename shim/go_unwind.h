// go_unwind: a goroutine's frames, from Go's own tables (.gopclntab); see
// go_unwind.cc. go_runtime.cc finds the table at setup.
#pragma once
#include <stdint.h>

namespace go_unwind {

// The executable's .gopclntab, as mapped. False if its format is not one
// this walker reads (the walk then finds no Go function). names: the
// executable has no DWARF, and name_of() names its code.
bool load(const void* pclntab, uint64_t size, bool names);
// The entry of the Go function named name (as Go names it: "runtime.exit"),
// 0 if none: the way to a function in a stripped binary.
uint64_t find_function(const char* name);
// The name of the Go function holding pc, from Go's tables (stripped
// binaries keep them), or null (not Go code, or DWARF names it).
const char* name_of(uint64_t pc);
// Whether pc is inside a Go function. Signal-safe.
bool in_go(uint64_t pc);
// The functions where Go changes stacks: a walk that reaches one of the
// first three stops there (the slot above it holds no return address of the
// same stack). runtime.systemstack_switch is the pc a goroutine's saved
// state names when it left its stack for the scheduler's; asmcgocall calls
// C there; a function that needs more stack calls morestack_noctxt.
enum Switch {
  kNoSwitch,
  kSystemstack,
  kMorestack,
  kMcall,
  kSystemstackSwitch,
  kAsmcgocall,
  kMorestackNoctxt,
  kSwitches
};
// The entry of that function (0: not found at load).
uint64_t switch_entry(Switch which);
// The entry of the Go function holding pc, 0 if none. Signal-safe.
uint64_t start_of(uint64_t pc);
// From the interrupted Go function at pc with stack pointer sp, appends
// its callers' return addresses to frames[n..max) while each lies inside
// [lo, hi) and is a Go function's; returns the new count. *at: the switch
// function the walk stopped in, or kNoSwitch. Signal-safe.
int walk(uint64_t pc, uintptr_t sp, uintptr_t lo, uintptr_t hi, uint64_t* frames, int n, int max, Switch* at);

}  // namespace go_unwind
