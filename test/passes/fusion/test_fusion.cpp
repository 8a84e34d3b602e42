// Fusion through the kiln backend: how many kernels a pattern becomes, and that the fused
// result equals eager code.
#include <catch2/catch.hpp>
#include <set>

#include <kiln/kiln.h>

#include "codegen/cpu/jit.h"
#include "codegen/lower_group.h"
#include "codegen/schedule.h"
#include "frontend/frontend_testing.h"
#include "ir/parser.h"
#include "passes/fusion.h"
#include "runtime/kernels/onednn.h"

using namespace kiln;
using kiln::testing::as_dtype_of;
using kiln::testing::close_to_eager;

namespace {

/// Compiles f, checks the traced and the replayed call by the f64 reference rule, and returns
/// how many kernels and library calls a call launches.
template <typename F, typename... T> int64_t check_kernels(F f, const T&... args) {
  auto c = compile(f);
  Tensor got = c(args...);
  std::optional<std::string> m = close_to_eager(got, f, args...);
  INFO(m.value_or(""));
  CHECK(!m);
  Tensor again = c(args...); // the replay path
  std::optional<std::string> m2 = close_to_eager(again, f, args...);
  INFO(m2.value_or(""));
  CHECK(!m2);
  return c.stats().kernels;
}

} // namespace

TEST_CASE("softmax over the last dim is one kernel", "[fusion][llvm]") {
  manual_seed(1);
  Tensor x = randn({64, 1000});
  CHECK(check_kernels([](const Tensor& a) { return softmax(a, -1); }, x) == 1);
  CHECK(check_kernels([](const Tensor& a) { return log_softmax(a, -1); }, x) == 1);
}

TEST_CASE("softmax over a leading dim is one kernel", "[fusion][llvm]") {
  manual_seed(2);
  Tensor x = randn({33, 17});
  CHECK(check_kernels([](const Tensor& a) { return softmax(a, 0); }, x) == 1);
}

TEST_CASE("layer_norm over the last dim is one kernel", "[fusion][llvm]") {
  manual_seed(3);
  Tensor x = randn({8, 7, 384}), w = randn({384}), b = randn({384});
  CHECK(check_kernels([](const Tensor& a, const Tensor& w_,
                         const Tensor& b_) { return layer_norm(a, {384}, w_, b_); },
                      x, w, b) == 1);
}

TEST_CASE("a GELU chain is one kernel", "[fusion][llvm]") {
  manual_seed(4);
  Tensor x = randn({1023});
  CHECK(check_kernels([](const Tensor& a) { return gelu(a * 2 + 1, "tanh") * a; }, x) == 1);
  CHECK(check_kernels([](const Tensor& a) { return gelu(a, "none") - a; }, x) == 1);
}

TEST_CASE("a residual MLP block is two library calls with their epilogues",
          "[fusion][llvm][onednn]") {
  manual_seed(5);
  Tensor x = randn({16, 64}), w1 = randn({128, 64}), b1 = randn({128}), w2 = randn({64, 128}),
         b2 = randn({64});
  auto block = [&](const Tensor& a) {
    Tensor h = gelu(linear(a, as_dtype_of(w1, a), as_dtype_of(b1, a)));
    return relu(linear(h, as_dtype_of(w2, a), as_dtype_of(b2, a)) + a);
  };
  // matmul+bias+gelu, matmul+bias+residual (oneDNN post-ops) and the relu in a kernel (oneDNN's
  // relu drops NaN); without oneDNN, two matmuls and two generated kernels.
  CHECK(check_kernels(block, x) == (library_epilogues_available() ? 3 : 4));
}

TEST_CASE("every epilogue form after a matmul joins the library call",
          "[fusion][epilogue][llvm][onednn]") {
  manual_seed(8);
  Tensor x = randn({4, 6, 32}), w = randn({24, 32}), b = randn({24}), r = randn({4, 6, 24});
  Tensor q = randn({2, 3, 5, 16}), k = randn({2, 3, 7, 16});
  const int64_t one = library_epilogues_available() ? 1 : 2; // the call, or matmul + kernel
  auto lin = [&](const Tensor& a) { return linear(a, as_dtype_of(w, a), as_dtype_of(b, a)); };
  // relu stays in a kernel after the call: oneDNN's relu maps NaN to 0, kiln's keeps it.
  CHECK(check_kernels([&](const Tensor& a) { return relu(lin(a)); }, x) == 2);
  // So does sigmoid: oneDNN's logistic maps NaN to 0 too.
  CHECK(check_kernels([&](const Tensor& a) { return sigmoid(lin(a)); }, x) == 2);
  CHECK(check_kernels([&](const Tensor& a) { return tanh(lin(a)); }, x) == one);
  CHECK(check_kernels([&](const Tensor& a) { return silu(lin(a)); }, x) == one);
  CHECK(check_kernels([&](const Tensor& a) { return gelu(lin(a), "none"); }, x) == one);
  CHECK(check_kernels([&](const Tensor& a) { return gelu(lin(a), "tanh"); }, x) == one);
  // Residual add (a whole-result operand over folded rows), scalar forms on both sides.
  CHECK(check_kernels([&](const Tensor& a, const Tensor& res) { return lin(a) + res; }, x, r) ==
        one);
  CHECK(check_kernels([&](const Tensor& a) { return (2.0 - lin(a)) / 4.0; }, x) == one);
  CHECK(check_kernels(
            [&](const Tensor& a) { return 0.5 * tanh(matmul(a, as_dtype_of(w, a).t()) - 1.0); },
            x) == one);
  // Attention scores: a batched product with the same batch dims, scaled.
  CHECK(check_kernels(
            [](const Tensor& a, const Tensor& c) { return matmul(a, c.transpose(-2, -1)) * 0.25; },
            q, k) == one);
}

TEST_CASE("a conv2d takes activations and constants as post-ops",
          "[fusion][epilogue][llvm][onednn]") {
  manual_seed(13);
  nn::Conv2d conv(3, 8, 3, 1, 1), conv64(3, 8, 3, 1, 1);
  conv64.load_state_dict(conv.state_dict());
  conv64.to(DType::f64); // the f64 reference run's module
  auto fwd = [&](const Tensor& a) {
    return a.dtype() == DType::f64 ? conv64.forward(a) : conv.forward(a);
  };
  Tensor x = randn({2, 3, 12, 12}), r = randn({2, 8, 12, 12});
  const int64_t one = library_epilogues_available() ? 1 : 2;
  auto conv_tanh = [&](const Tensor& a) { return tanh(fwd(a) * 0.5 + 1.0); };
  CHECK(check_kernels(conv_tanh, x) == one);
  // sigmoid stays in a kernel (oneDNN's logistic maps NaN to 0): conv + kernel.
  CHECK(check_kernels([&](const Tensor& a) { return sigmoid(fwd(a)); }, x) == 2);
  // relu stays in a kernel (oneDNN's relu maps NaN to 0): conv + kernel.
  CHECK(check_kernels([&](const Tensor& a) { return relu(fwd(a)); }, x) == 2);
  CHECK(check_kernels([&](const Tensor& a) { return silu(fwd(a)); }, x) == one);
  // A residual operand stays in a kernel after the call: conv + kernel.
  CHECK(check_kernels([&](const Tensor& a, const Tensor& res) { return relu(fwd(a) + res); }, x,
                      r) == 2);
}

TEST_CASE("epilogues without oneDNN give the unfused result bit for bit", "[fusion][epilogue]") {
  manual_seed(9);
  Tensor x = randn({10, 32}), w = randn({24, 32}), b = randn({24}), r = randn({10, 24});
  auto f = [&](const Tensor& a, const Tensor& res) {
    return gelu(linear(a, w, b), "tanh") * 3.0 + res;
  };
  auto c = compile(f);
  bool was = kernels::set_onednn_enabled(false);
  Tensor got = c(x, r), want = f(x, r);
  kernels::set_onednn_enabled(was);
  KILN_REQUIRE_BITWISE(got, want);
}

TEST_CASE("packed parameter weights follow in-place updates", "[fusion][epilogue]") {
  nn::Linear lin(32, 16);
  auto cm = compile([&](const Tensor& a) { return relu(lin.forward(a)); });
  manual_seed(10);
  Tensor x = randn({8, 32});
  auto eager = [&](const Tensor& a) {
    return relu(linear(a, as_dtype_of(lin.weight, a), as_dtype_of(lin.bias, a)));
  };
  KILN_REQUIRE_CLOSE(cm(x), eager, x);
  {
    NoGradGuard g;
    lin.weight.mul_(-1.0); // the packed copy is stale now
  }
  KILN_REQUIRE_CLOSE(cm(x), eager, x);
  lin.load_state_dict(nn::Linear(32, 16).state_dict());
  KILN_REQUIRE_CLOSE(cm(x), eager, x);
}

TEST_CASE("an epilogue stops where an intermediate is read elsewhere", "[fusion][epilogue]") {
  const char* text = R"(graph @g {
  %0 : f32[8,16] = input "a"
  %1 : f32[16,4] = input "b"
  %2 : f32[8,4] = matmul(%0, %1)
  %3 : f32[8,4] = sigmoid(%2)
  %4 : f32[8,4] = tanh(%3)
  %5 : f32[8,4] = exp(%4)
  %6 : f32[8,4] = sigmoid(%2)
  return %5, %3
})";
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(text);
  REQUIRE(static_cast<bool>(g));
  // %2 has two readers: no epilogue at all.
  CHECK(passes::match_library_epilogues(**g).empty());
  const char* text2 = R"(graph @g {
  %0 : f32[8,16] = input "a"
  %1 : f32[16,4] = input "b"
  %2 : f32[8,4] = matmul(%0, %1)
  %3 : f32[8,4] = tanh(%2)
  %4 : f32[8,4] = sigmoid(%3)
  %5 : f32[8,4] = exp(%4)
  return %5, %3
})";
  g = ir::parse_graph(text2);
  REQUIRE(static_cast<bool>(g));
  std::vector<passes::LibraryCall> calls = passes::match_library_epilogues(**g);
  if (!library_epilogues_available()) return;
  // %3 is an output: the call ends there and sigmoid, exp form a kernel.
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].epilogue.str() == "tanh");
  CHECK(calls[0].output == calls[0].nodes.back()->output());
  CHECK(calls[0].nodes.size() == 1);
  passes::FusionResult fusion = passes::fuse(**g);
  CHECK(fusion.groups.size() == 1);
  CHECK(fusion.order.size() == 2);
}

TEST_CASE("a sum of two products joins one call and the other ends before it",
          "[fusion][epilogue][llvm][onednn]") {
  // Two experts weighted by strided gate columns and summed: the add reads both calls'
  // results, so only one may own it (owning it twice made a cycle between the steps).
  manual_seed(11);
  Tensor x = randn({8, 32}), w1 = randn({16, 32}), w2 = randn({16, 32}), b = randn({16}),
         gate = softmax(randn({8, 2}), -1);
  auto f = [&](const Tensor& a, const Tensor& gt) {
    const Tensor bias = as_dtype_of(b, a);
    Tensor e1 = linear(a, as_dtype_of(w1, a), bias) * gt.slice(1, 0, 1);
    Tensor e2 = linear(a, as_dtype_of(w2, a), bias) * gt.slice(1, 1, 2);
    return relu(e1 + e2);
  };
  auto c = compile(f);
  KILN_REQUIRE_CLOSE(c(x, gate), f, x, gate);
  KILN_REQUIRE_CLOSE(c(x, gate), f, x, gate);
  // matmul+bias+gate+sum and matmul+bias+gate, then the relu in a kernel (oneDNN's relu maps
  // NaN to 0); without oneDNN, two matmuls, the gate columns and one kernel.
  CHECK(c.stats().kernels == 3);
}

TEST_CASE("pointwise chains over views and broadcasts fuse", "[fusion][llvm]") {
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

TEST_CASE("a long row sum keeps several vector accumulators folded in a fixed order",
          "[fusion][llvm]") {
  // The schedule of a sum over a unit-stride row of 4099: inner vector code, lanes x 4
  // accumulators (the unroll), a scalar tail of 4099 mod (lanes x 4), then the accumulators
  // folded lane 0 first. Emulating exactly that order gives the compiled result bit for
  // bit; any other order (one accumulator, a tree, a different tail) differs in some row.
  // Under every vector width (KILN_SCHEDULE's lanes, which any host can run) and the host's.
  manual_seed(21);
  const int64_t n = 4099;
  Tensor x = randn({6, n}) * 1000;
  std::vector<float> xs = x.to_vector<float>();
  std::set<std::vector<float>> results;
  for (int f32_lanes : {0, 4, 8, 16}) {
    INFO(
        "lanes " << (f32_lanes == 0 ? std::string("without override") : std::to_string(f32_lanes)));
    CompileOptions o;
    if (f32_lanes > 0) o.schedule = "lanes=" + std::to_string(f32_lanes);
    auto f = compile([](const Tensor& a) { return a.sum({1}); }, o);
    Tensor got = f(x);
    REQUIRE(f.stats().generated_kernels == 1);
    // No override here: the host's width, or KILN_SCHEDULE's when a sweep sets it.
    const int env_lanes = codegen::parse_schedule_override(codegen::schedule_override_env()).lanes;
    const int host = env_lanes > 0 ? env_lanes : codegen::cpu::host_target().vector_bytes / 4;
    const int lanes = (f32_lanes > 0 ? f32_lanes : host) * 4;
    std::vector<float> gs = got.to_vector<float>();
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
    if (f32_lanes > 0) results.insert(gs);
  }
  CHECK(results.size() == 3); // the widths really differ: each is its own order
}

// Softmax computes exp once (the sum loop stashes it in the output):
// test/passes/fusion/softmax.kir.

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
  std::vector<Tensor> want = f(x), got = c(x), ref = f(x.to(DType::f64));
  REQUIRE(got.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    std::optional<std::string> m = check_accuracy(got[i], want[i], ref[i]);
    INFO(m.value_or(""));
    CHECK(!m);
  }
}

namespace {

/// For each kernel of a parsed graph's one group: may output 0 write over input `in`?
bool writes_over(const char* text, int in) {
  Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(text);
  REQUIRE(static_cast<bool>(g));
  passes::FusionResult fusion = passes::fuse(**g);
  REQUIRE(fusion.groups.size() == 1);
  ir::kernel::Kernel k = codegen::lower_group(fusion.groups[0], "k").kernel;
  int out = -1;
  for (size_t b = 0; b < k.buffers.size(); ++b)
    if (k.buffers[b].output) out = static_cast<int>(b);
  REQUIRE(out >= 0);
  INFO(k.str());
  return k.may_write_over(out, in);
}

} // namespace

TEST_CASE("a kernel may write over an input it reads only where it writes", "[fusion][memory]") {
  // exp(x) + b: x is read at the store's index; b (a broadcast row) is not.
  const char* pointwise = R"(graph @g {
  %0 : f32[64,32] = input "x"
  %1 : f32[32] = input "b"
  %2 : f32[64,32] = exp(%0)
  %3 : f32[64,32] = add(%2, %1)
  return %3
})";
  CHECK(writes_over(pointwise, 0));
  CHECK_FALSE(writes_over(pointwise, 1));
  // Softmax reads each row in its reduction loops before the loop that stores it.
  const char* softmax = R"(graph @g {
  %0 : f32[64,32] = input "x"
  %1 : f32[64,1] = amax(%0) {dims = [-1], keepdim = true}
  %2 : f32[64,32] = sub(%0, %1)
  %3 : f32[64,32] = exp(%2)
  %4 : f32[64,1] = sum(%3) {dims = [-1], keepdim = true, dtype = f32}
  %5 : f32[64,32] = div(%3, %4)
  return %5
})";
  CHECK(writes_over(softmax, 0));
  // A transposed read meets elements other threads write: never in place.
  const char* transposed = R"(graph @g {
  %0 : f32[32,32] = input "x"
  %1 : f32[32,32]{1,32} = permute(%0) {dims = [1, 0]}
  %2 : f32[32,32] = exp(%1)
  return %2
})";
  CHECK_FALSE(writes_over(transposed, 0));
  // A reduction's output is smaller than its input; a cast changes the element size.
  const char* reduction = R"(graph @g {
  %0 : f32[64,32] = input "x"
  %1 : f32[64] = sum(%0) {dims = [-1], keepdim = false, dtype = f32}
  return %1
})";
  CHECK_FALSE(writes_over(reduction, 0));
  const char* cast = R"(graph @g {
  %0 : f32[64,32] = input "x"
  %1 : bool[64,32] = gt(%0, %0)
  return %1
})";
  CHECK_FALSE(writes_over(cast, 0));
}

TEST_CASE("compiled graphs with planned and in-place buffers match eager", "[fusion][memory]") {
  // Kernels between library calls: their buffers live in the arena, some written in place.
  manual_seed(12);
  Tensor x = randn({16, 48}), w = randn({48, 48});
  auto f = [&](const Tensor& a) {
    const Tensor wa = as_dtype_of(w, a);
    Tensor h = softmax(matmul(a, wa), -1);    // a kernel over the matmul's result
    Tensor g = layer_norm(h, {48});           // another, over the first's
    Tensor y = matmul(g.exp(), wa).sum({-1}); // exp in place of g; the product is eager
    return y + matmul(softmax(h, 0), wa).sum({-1});
  };
  auto c = compile(f);
  for (int k = 0; k < 3; ++k)
    KILN_REQUIRE_CLOSE(c(x), f, x);
}
