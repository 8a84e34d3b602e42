// Reuse across inner loops: which values a kernel's inner loops compute once and keep in a
// per-row scratch ("stash") for the later loops that compute them again.
//
// The lowering gives every reduce loop the whole producer chain of what it folds, so a long
// chain of reductions over one row (tanh, softmax, tanh, softmax, ...) recomputes every
// earlier stage in every later loop: the kernel's text grows as the square of the chain, and
// so do its compile and run times. Each inner loop runs over the same inner domain, in the
// same order, with the same vector steps, so a value an earlier loop computed at an inner
// point can be stored there and loaded by a later loop at the same point, bit for bit the
// value it would recompute. Kernels with little recomputation are left as they are.
#pragma once

#include <vector>

#include "ir/kernel/kernel.h"

namespace kiln::codegen::cpu {

struct ReusePlan {
  /// Whether the plan applies; otherwise every instruction is emitted as written.
  bool enabled = false;
  /// Per instruction id: whether it is computed (false: dead once later loops read the
  /// stashes, or itself read from a stash).
  std::vector<bool> compute;
  /// Per instruction id: the stash slot its value is stored to after it is computed, or -1.
  std::vector<int> store_slot;
  /// Per instruction id: the stash slot its value is loaded from instead, or -1.
  std::vector<int> load_slot;
  /// Per slot: the dtype of the values it holds (their register type is the element type).
  /// Slots are reused once their last reader has run.
  std::vector<DType> slots;
};

/// The plan for `k`: values (ops and casts, bool aside) a loop computes that a later loop
/// computes again with the same operands are stashed, and the later loop computes only what
/// it cannot load. Enabled when a costly op (ops.def traits: exp, tanh, ...) repeats an
/// earlier loop's value (softmax's exp(x - max) when its output is too large to stash it in:
/// lower_group.cpp), or when at least `min_repeated` of the loops' instructions (and at least
/// half of them) do.
ReusePlan plan_reuse(const ir::kernel::Kernel& k, int min_repeated = 64);

} // namespace kiln::codegen::cpu
