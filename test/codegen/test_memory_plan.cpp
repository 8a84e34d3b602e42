// The memory plan of runtime Plans (codegen/memory_plan), on hand-built plans: buffers share
// an arena by lifetime and in place, views keep their buffer alive, and what the caller sees
// is never planned.
#include <catch2/catch.hpp>
#include <vector>

#include <kiln/kiln.h>

#include "codegen/memory_plan.h"
#include "plan_testing.h"
#include "runtime/plan.h"

using namespace kiln;

using kiln::testing::eager;
using kiln::testing::twice;

namespace {

/// `twice` over n rows as one chunk.
Plan::KernelCall twice_call(int64_t n) {
  Plan::KernelCall call;
  call.entry = twice;
  call.rows = n;
  call.grain = n;
  call.outputs.push_back({{n}, DType::f32});
  return call;
}

// in -> twice -> twice -> twice -> neg: three kernel buffers, each read only by the next step.
Plan chain_plan(bool in_place, int64_t n) {
  static const Attrs none;
  Plan plan;
  plan.bind_input(0, 0);
  const Plan::KernelCall call = twice_call(n);
  int kernel = plan.add_kernel(call);
  for (size_t s = 0; s < 3; ++s) {
    Plan::Step k;
    k.kernel = kernel;
    k.operands = {s};
    k.results = {s + 1};
    if (in_place && s > 0) k.may_reuse = {{0, 0}};
    plan.add_step(k);
  }
  plan.add_step(eager(Op::neg, none, {3}, {4}));
  plan.add_output(4);
  plan.finish(5);
  codegen::plan_memory(plan);
  return plan;
}

} // namespace

TEST_CASE("a plan's buffers share an arena by lifetime and in place", "[plan][memory]") {
  const int64_t n = 1000; // 4000 bytes, 4032 aligned
  Tensor x = arange(0, n, 1, TensorOptions().dtype(DType::f32));
  std::vector<Tensor> in{x};
  for (bool in_place : {false, true}) {
    Plan plan = chain_plan(in_place, n);
    const Plan::MemoryPlan& m = plan.memory_plan();
    INFO(m.str());
    CHECK(m.buffers == 3);
    CHECK(m.planned_bytes == 3 * 4032);
    // Without reuse a step's operand and result are both alive: two buffers alternate.
    CHECK(m.arena_bytes == (in_place ? 1 : 2) * 4032);
    CHECK(m.in_place == (in_place ? 2 : 0));
    std::vector<float> got = plan.run(in)[0].to_vector<float>();
    CHECK(got[3] == -24.f);
    CHECK(got[999] == -8.f * 999);
  }
}

TEST_CASE("a plan keeps a buffer while a view of it is read", "[plan][memory]") {
  // s1 = twice(x); v = s1[0:n/2] (a view); s2 = twice(x); out = v + s2[0:n/2].
  // s2 must not take s1's bytes: v still reads them.
  const int64_t n = 64;
  static const Attrs none;
  static const Attrs half{int64_t{0}, int64_t{0}, n / 2, int64_t{1}};
  Plan plan;
  plan.bind_input(0, 0);
  const Plan::KernelCall call = twice_call(n);
  int kernel = plan.add_kernel(call);
  Plan::Step k1;
  k1.kernel = kernel;
  k1.operands = {0};
  k1.results = {1};
  plan.add_step(k1);
  plan.add_step(eager(Op::slice, half, {1}, {2}));
  Plan::Step k2 = k1;
  k2.results = {3};
  plan.add_step(k2);
  plan.add_step(eager(Op::slice, half, {3}, {4}));
  plan.add_step(eager(Op::add, none, {2, 4}, {5}));
  plan.add_output(5);
  plan.finish(6);
  codegen::plan_memory(plan);
  CHECK(plan.memory_plan().arena_bytes == 2 * 256);
  Tensor x = arange(0, n, 1, TensorOptions().dtype(DType::f32));
  std::vector<Tensor> in{x};
  std::vector<float> got = plan.run(in)[0].to_vector<float>();
  CHECK(got[5] == 20.f);

  // A buffer the caller sees through a view is never planned.
  Plan out_view;
  out_view.bind_input(0, 0);
  kernel = out_view.add_kernel(call);
  k1.kernel = kernel;
  out_view.add_step(k1);
  out_view.add_step(eager(Op::slice, half, {1}, {2}));
  out_view.add_output(2);
  out_view.finish(3);
  codegen::plan_memory(out_view);
  CHECK(out_view.memory_plan().buffers == 0);
  Tensor first = out_view.run(in)[0];
  Tensor second = out_view.run(in)[0];
  CHECK(first.to_vector<float>()[31] == 62.f);
  CHECK(second.to_vector<float>()[31] == 62.f);
}
