// The type-erased loop driver of loop_driver.h: one instantiation of run_loop per arity.
#include "runtime/kernels/loop_driver.h"

namespace kiln::kernels {
namespace {

template <size_t N> void run_erased(const LoopPlan<N>& plan, RunFn<N> fn, const void* ctx) {
  run_loop(plan, [fn, ctx](const std::array<char*, N>& p, const std::array<int64_t, N>& s,
                           int64_t n) { fn(ctx, p, s, n); });
}

} // namespace

void run_runs(const LoopPlan<1>& plan, RunFn<1> fn, const void* ctx) { run_erased(plan, fn, ctx); }
void run_runs(const LoopPlan<2>& plan, RunFn<2> fn, const void* ctx) { run_erased(plan, fn, ctx); }
void run_runs(const LoopPlan<3>& plan, RunFn<3> fn, const void* ctx) { run_erased(plan, fn, ctx); }
void run_runs(const LoopPlan<4>& plan, RunFn<4> fn, const void* ctx) { run_erased(plan, fn, ctx); }

} // namespace kiln::kernels
