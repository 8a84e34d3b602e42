// Fusion through the kiln backend: how many kernels a pattern becomes, and that the fused
// result equals eager code.
#include <catch2/catch.hpp>

#include <kiln/kiln.h>

#include "codegen/cpu/jit.h"
#include "frontend/frontend_testing.h"
#include "ir/parser.h"
#include "passes/fusion.h"

using namespace kiln;
using kiln::testing::close_to;

namespace {

template <typename F, typename... T> int64_t check_kernels(F f, const T&... args) {
  auto c = compile(f);
  Tensor want = f(args...);
  Tensor got = c(args...);
  INFO("eager " << want << "\ncompiled " << got);
  CHECK(close_to(got, want));
  Tensor again = c(args...); // the replay path
  CHECK(close_to(again, want));
  return c.stats().kernels;
}

} // namespace

TEST_CASE("softmax over the last dim is one kernel", "[fusion]") {
  manual_seed(1);
  Tensor x = randn({64, 1000});
  CHECK(check_kernels([](const Tensor& a) { return softmax(a, -1); }, x) == 1);
  CHECK(check_kernels([](const Tensor& a) { return log_softmax(a, -1); }, x) == 1);
}

TEST_CASE("softmax over a leading dim is one kernel", "[fusion]") {
  manual_seed(2);
  Tensor x = randn({33, 17});
  CHECK(check_kernels([](const Tensor& a) { return softmax(a, 0); }, x) == 1);
}

TEST_CASE("layer_norm over the last dim is one kernel", "[fusion]") {
  manual_seed(3);
  Tensor x = randn({8, 7, 384}), w = randn({384}), b = randn({384});
  CHECK(check_kernels([](const Tensor& a, const Tensor& w_,
                         const Tensor& b_) { return layer_norm(a, {384}, w_, b_); },
                      x, w, b) == 1);
}

TEST_CASE("a GELU chain is one kernel", "[fusion]") {
  manual_seed(4);
  Tensor x = randn({1023});
  CHECK(check_kernels([](const Tensor& a) { return gelu(a * 2 + 1, "tanh") * a; }, x) == 1);
  CHECK(check_kernels([](const Tensor& a) { return gelu(a, "none") - a; }, x) == 1);
}

TEST_CASE("a residual MLP block is two library calls and two kernels", "[fusion]") {
  manual_seed(5);
  Tensor x = randn({16, 64}), w1 = randn({128, 64}), b1 = randn({128}), w2 = randn({64, 128}),
         b2 = randn({64});
  auto block = [&](const Tensor& a) { return relu(linear(gelu(linear(a, w1, b1)), w2, b2) + a); };
  // matmul, bias+gelu, matmul, bias+residual+relu.
  CHECK(check_kernels(block, x) == 4);
}

TEST_CASE("pointwise chains over views and broadcasts fuse", "[fusion]") {
  manual_seed(6);
  Tensor x = randn({37, 19}), y = randn({19});
  CHECK(check_kernels([](const Tensor& a, const Tensor& b) { return (a.t() * 2).t() + b; }, x, y) ==
        1);
  CHECK(check_kernels([](const Tensor& a) { return a.slice(1, 1, 19, 3).exp().sum({0}); }, x) == 1);
  CHECK(check_kernels([](const Tensor& a) { return (a.t() + 1).reshape({19 * 37}) * 3; }, x) == 1);
  CHECK(check_kernels([](const Tensor& a) { return a.sum({1}, true) - a; }, x) == 1);
}

TEST_CASE("without fusion each op is its own kernel", "[fusion]") {
  manual_seed(7);
  Tensor x = randn({64, 100});
  CompileOptions o;
  o.backend = "interpreter";
  auto c = compile([](const Tensor& a) { return softmax(a, -1); }, o);
  Tensor r = c(x);
  CHECK(c.stats().kernels > 3);
}

TEST_CASE("a long row sum keeps several vector accumulators folded in a fixed order", "[fusion]") {
  // The schedule of a sum over a unit-stride row of 4099: inner vector code, lanes x 4
  // accumulators (the unroll), a scalar tail of 4099 mod (lanes x 4), then the accumulators
  // folded lane 0 first. Emulating exactly that order gives the compiled result bit for
  // bit; any other order (one accumulator, a tree, a different tail) differs in some row.
  manual_seed(21);
  const int64_t n = 4099;
  Tensor x = randn({6, n}) * 1000;
  auto f = compile([](const Tensor& a) { return a.sum({1}); });
  Tensor got = f(x);
  REQUIRE(f.stats().generated_kernels == 1);
  const int lanes = codegen::cpu::host_target().vector_bytes / 4 * 4;
  std::vector<float> xs = x.to_vector<float>(), gs = got.to_vector<float>();
  bool one_differs = false;
  for (int64_t r = 0; r < 6; ++r) {
    const float* row = xs.data() + r * n;
    std::vector<float> acc(static_cast<size_t>(lanes), 0.0f);
    const int64_t vec_end = n / lanes * lanes;
    for (int64_t i = 0; i < vec_end; ++i)
      acc[static_cast<size_t>(i % lanes)] += row[i];
    float tail = 0.0f;
    for (int64_t i = vec_end; i < n; ++i)
      tail += row[i];
    float want = acc[0];
    for (int lane = 1; lane < lanes; ++lane)
      want += acc[static_cast<size_t>(lane)];
    want += tail;
    float sequential = 0.0f;
    for (int64_t i = 0; i < n; ++i)
      sequential += row[i];
    one_differs = one_differs || sequential != want;
    CHECK(gs[static_cast<size_t>(r)] == want);
  }
  CHECK(one_differs); // the inputs tell the orders apart
  for (int call = 0; call < 3; ++call)
    CHECK(f(x).to_vector<float>() == gs);
}

TEST_CASE("softmax computes exp once: the sum loop stashes it in the output", "[fusion]") {
  const char* text = R"(graph @g {
  %0 : f32[64,4096] = input "x"
  %1 : f32[64,1] = amax(%0) {dims = [1], keepdim = true}
  %2 : f32[64,4096] = sub(%0, %1)
  %3 : f32[64,4096] = exp(%2)
  %4 : f32[64,1] = sum(%3) {dims = [1], keepdim = true, dtype = f32}
  %5 : f32[64,4096] = div(%3, %4)
  return %5
})";
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(text);
  REQUIRE(static_cast<bool>(g));
  passes::FusionResult fusion = passes::fuse(**g);
  REQUIRE(fusion.groups.size() == 1);
  std::vector<const ir::Value*> buffers;
  std::string k = passes::lower_group(fusion.groups[0], "k", buffers).str();
  INFO(k);
  size_t exps = 0;
  for (size_t at = k.find("= exp "); at != std::string::npos; at = k.find("= exp ", at + 1))
    ++exps;
  CHECK(exps == 1);
  // Stored in the sum loop, loaded back by the map loop before its own store.
  size_t map = k.find("map loop");
  REQUIRE(map != std::string::npos);
  CHECK(k.rfind("store out1", map) != std::string::npos);
  CHECK(k.find("load out1", map) < k.find("store out1", map));
}

TEST_CASE("a stashed value serves only the output it is stored in", "[fusion]") {
  // Both outputs use exp(x - max) in the map loop: one takes it from its own buffer, the
  // other must not read a buffer the first has already overwritten.
  manual_seed(31);
  Tensor x = randn({8, 300});
  auto f = [](const Tensor& a) {
    Tensor e = exp(a - amax(a, {1}, true));
    return std::vector<Tensor>{e / e.sum({1}, true), e * 2, e + 1};
  };
  auto c = compile(f);
  std::vector<Tensor> want = f(x), got = c(x);
  REQUIRE(got.size() == 3);
  for (size_t i = 0; i < 3; ++i)
    CHECK(close_to(got[i], want[i]));
}
