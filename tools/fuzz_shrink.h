// Shrinking a failing `kiln fuzz` program: delta debugging over its steps, outputs, inputs
// and sizes, keeping each smaller program for which the failure persists.
#pragma once

#include <functional>

#include "tools/fuzz_program.h"

namespace kiln::tools {

/// Whether a candidate program still fails the same way (run in a child process by the
/// caller; an invalid candidate does not fail).
using StillFails = std::function<bool(const Program&)>;

/// The smallest program reached from `p` by single reductions that keep `fails` true, trying
/// at most `budget` candidates: keep one output; drop a step (its result becomes a new input
/// of the same type, or for an in-place step its target); drop unused inputs; shrink a size
/// (everywhere it occurs in the inputs) to 1 or to half.
Program shrink_program(Program p, const StillFails& fails, int budget);

/// The program without step k: uses of its result read a new input of its type instead (for a
/// step writing in place, its target, which it then no longer writes).
Program drop_step(const Program& p, size_t k, bool in_place);

/// The program with inputs that nothing reads removed.
Program drop_unused_inputs(const Program& p);

} // namespace kiln::tools
