// run_loop with the per-run body behind a function pointer: the chunking and index walk are
// compiled once instead of once per (op, dtype), which keeps the pointwise kernels' build small.
#pragma once

#include <array>
#include <cstdint>

#include "runtime/kernels/loops.h"

namespace kiln::kernels {

/// Body for one run of n elements: p points at each operand's first element, s holds the
/// byte strides along the run. ctx is the caller's state (the op's functor, a scalar, ...).
template <size_t N>
using RunFn = void (*)(const void* ctx, const std::array<char*, N>& p,
                       const std::array<int64_t, N>& s, int64_t n);

/// Runs fn over every run of the plan, in parallel chunks when large (as run_loop). The call
/// through fn happens once per run, not per element, so its cost is negligible.
void run_runs(const LoopPlan<1>& plan, RunFn<1> fn, const void* ctx);
void run_runs(const LoopPlan<2>& plan, RunFn<2> fn, const void* ctx);
void run_runs(const LoopPlan<3>& plan, RunFn<3> fn, const void* ctx);
void run_runs(const LoopPlan<4>& plan, RunFn<4> fn, const void* ctx);

} // namespace kiln::kernels
