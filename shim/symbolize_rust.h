// symbolize_rust: a Rust function's name as Rust's own tools print it
// (rustc-demangle's "{:#}", what a backtrace shows: rs_work::fib,
// <alloc::vec::Vec<T> as core::ops::drop::Drop>::drop), from either of
// rustc's manglings: legacy (C++'s _ZN...E with a last "17h" + 16 hex digits
// segment and "$LT$"-style escapes) and v0 (_R...). libiberty's demangler,
// linked in with its symbols hidden, reads both: a v0 demangler is too much
// grammar to keep one of our own.
#pragma once
#include <string>

namespace symbolize {
namespace internal {

// True if sym is a Rust symbol of either mangling: *out is then its name
// without the build hash (legacy) or the crates' disambiguators (v0), and
// without a "." suffix LLVM or a compiler's clone added (".llvm.1075...",
// ".cold"): the function the source has, named the same wherever it appears.
// A v0 name keeps the type arguments of a generic function's or impl's
// instance (rs_work::burn::<u32>), which legacy mangling does not record.
bool rust_name(const char* sym, std::string* out);

}  // namespace internal
}  // namespace symbolize
