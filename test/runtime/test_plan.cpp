// The runtime Plan executor, on hand-built plans: bindings, eager and kernel steps, parallel
// rows, releases after the last read, and end-of-run writes that read their sources first.
#include <atomic>
#include <catch2/catch.hpp>
#include <vector>

#include <kiln/kiln.h>

#include "plan_testing.h"
#include "runtime/plan.h"

using namespace kiln;

using kiln::testing::eager;
using kiln::testing::g_row_runs;
using kiln::testing::twice;

TEST_CASE("a plan runs eager steps and kernels over every row once", "[plan]") {
  const int64_t n = 100000;
  static const Attrs none;
  Plan plan;
  plan.bind_input(0, 0);
  plan.bind_constant(1, full({n}, 1.5f));
  plan.add_step(eager(Op::add, none, {0, 1}, {2})); // x + 1.5
  Plan::KernelCall call;
  call.entry = twice;
  call.rows = n;
  call.grain = 1000; // many chunks
  call.outputs.push_back({{n}, DType::f32});
  Plan::Step k;
  k.kernel = plan.add_kernel(call);
  k.operands = {2};
  k.results = {3};
  plan.add_step(k);
  plan.add_step(eager(Op::neg, none, {3}, {4}));
  plan.add_output(4);
  plan.add_output(2);
  plan.finish(5);
  // Slot 2 is an output, so it is never released; the input and constant slots go after
  // step 0, slot 3 after its last read (step 2).
  REQUIRE(plan.steps().size() == 3);
  CHECK(plan.steps()[0].release == std::vector<size_t>{0, 1});
  CHECK(plan.steps()[1].release == std::vector<size_t>{});
  CHECK(plan.steps()[2].release == std::vector<size_t>{3});

  std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
  g_row_runs = &runs;
  Tensor x = arange(0, n, 1, TensorOptions().dtype(DType::f32));
  std::vector<Tensor> in{x};
  std::vector<Tensor> out = plan.run(in);
  g_row_runs = nullptr;
  REQUIRE(out.size() == 2);
  std::vector<float> got = out[0].to_vector<float>();
  bool all_once = true;
  for (int64_t r = 0; r < n; ++r) {
    all_once = all_once && runs[static_cast<size_t>(r)] == 1;
    if (got[static_cast<size_t>(r)] != -2 * (float(r) + 1.5f)) {
      FAIL_CHECK("row " << r << ": " << got[static_cast<size_t>(r)]);
      break;
    }
  }
  CHECK(all_once);
  CHECK(out[1].to_vector<float>()[7] == 8.5f);
}

TEST_CASE("a plan's writes read every source before any lands", "[plan]") {
  // a <- b and b <- a at the end of the run: a swap, not two copies of the same value.
  static const Attrs none;
  Plan plan;
  plan.bind_input(0, 0);
  plan.bind_input(1, 1);
  plan.add_step(eager(Op::relu, none, {0}, {2}));
  plan.add_output(2);
  plan.add_write(0, 1);
  plan.add_write(1, 0);
  plan.finish(3);
  Tensor a = full({3}, -4.0f), b = full({3}, 5.0f);
  std::vector<Tensor> in{a, b};
  std::vector<Tensor> out = plan.run(in);
  CHECK(out[0].to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(a.to_vector<float>() == std::vector<float>{5, 5, 5});
  CHECK(b.to_vector<float>() == std::vector<float>{-4, -4, -4});
}

TEST_CASE("a plan refuses a kernel step whose results do not match the kernel", "[plan]") {
  Plan plan;
  Plan::KernelCall call;
  call.entry = twice;
  call.rows = 1;
  call.outputs.push_back({{1}, DType::f32});
  Plan::Step k;
  k.kernel = plan.add_kernel(call);
  k.operands = {0};
  k.results = {1, 2};
  CHECK_THROWS_AS(plan.add_step(k), Error);
  std::vector<Tensor> none;
  Plan unbound;
  unbound.bind_input(0, 0);
  unbound.add_output(0);
  unbound.finish(1);
  CHECK_THROWS_AS(unbound.run(none), Error);
}
