// The loop IR's text parser: reads exactly what Kernel::str() prints, with line:column errors.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/kernel/kernel.h"
#include "runtime/error.h"

namespace kiln::ir::kernel {

/// A place in a text, 1-based; line 0 means "not from a text".
struct SourceLoc {
  int line = 0;
  int col = 0;
};

/// One kernel of a text and where its parts were written, so that verifier errors can point
/// at the offending line (`verify(const ParsedKernel&, file)` in ir/kernel/verifier.h).
struct ParsedKernel {
  Kernel kernel;
  /// The text after `schedule` on a `// schedule ...` or `schedule ...` line just before the
  /// kernel (Schedule::str()'s form, "vector=inner lanes=8 unroll=4 block=1 grain=16"), read
  /// by codegen::parse_schedule; nullopt when the kernel has none.
  std::optional<std::string> schedule;
  SourceLoc schedule_at;
  SourceLoc at;                     // the `kernel` keyword
  std::vector<SourceLoc> buffer_at; // by buffer index: the `buffer` keyword
  std::vector<SourceLoc> instr_at;  // by instruction id: the `%N` that defines it
  std::vector<SourceLoc> loop_at;   // by loop index: its `reduce` / `map` keyword
};

/// Parses every kernel of `text`, each optionally preceded by a schedule line. Errors read
/// "FILE:LINE:COL: error: expected ..., got ...". Parsing checks the syntax, buffer names
/// (declared once, before the first instruction), instruction ids (each defined once, ids
/// 0..N-1 without gaps, every operand an id of the kernel) and op names; the order of
/// definitions and uses, the index ranges and the dtypes are the verifier's.
Expected<std::vector<ParsedKernel>> parse_kernels(std::string_view text,
                                                  std::string_view file_name = "<input>");

/// Parses a text holding exactly one kernel (a schedule line before it is allowed and dropped).
Expected<Kernel> parse_kernel(std::string_view text, std::string_view file_name = "<input>");

/// Whether `text` is loop IR rather than graph IR: its first line that is neither blank nor a
/// `//` comment starts with the word `kernel` or `schedule`, or a `// schedule` comment comes
/// before that line. (Graph texts start with `graph`.)
bool is_kernel_text(std::string_view text);

} // namespace kiln::ir::kernel
