// Autograd (runtime/autograd/autograd.h): gradients against finite differences in f64
// (gradcheck) for the differentiable ops, leaf accumulation, retain_grad, autograd::grad and
// double backward, the in-place rules, NoGradGuard and InferenceMode.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include <kiln/kiln.h>

#include "runtime/allocator.h"
#include "runtime/autograd/autograd.h"

using namespace kiln;

namespace {

/// Checks fn's gradients at `inputs` (f64 leaves) against central differences: for a random
/// weighting v of the output, d(v . fn)/d(input) by autograd::grad equals the finite
/// difference of v . fn along each input element, within 1e-6 relative to the larger of 1 and
/// the derivative's size.
void gradcheck(const std::string& what, const std::function<Tensor(std::vector<Tensor>&)>& fn,
               std::vector<Tensor> inputs) {
  INFO(what);
  for (Tensor& t : inputs)
    t.requires_grad_(true);
  Tensor y = fn(inputs);
  REQUIRE(y.requires_grad());
  manual_seed(99);
  const Tensor v = randn(y.sizes(), DType::f64);
  const std::vector<Tensor> analytic = autograd::grad({y}, inputs, {v});
  const double h = 1e-6;
  for (size_t k = 0; k < inputs.size(); ++k) {
    INFO("input " << k << " " << shape_str(inputs[k].sizes()));
    REQUIRE(analytic[k].sizes() == inputs[k].sizes());
    REQUIRE(analytic[k].dtype() == DType::f64);
    const Tensor a = analytic[k].contiguous();
    for (int64_t i = 0; i < inputs[k].numel(); ++i) {
      auto at = [&](double delta) {
        std::vector<Tensor> moved;
        for (size_t j = 0; j < inputs.size(); ++j) {
          Tensor c = inputs[j].detach().clone();
          if (j == k) static_cast<double*>(c.raw_data())[i] += delta;
          moved.push_back(c);
        }
        const NoGradGuard no_grad;
        return (fn(moved).to(DType::f64) * v).sum().item<double>();
      };
      const double numeric = (at(h) - at(-h)) / (2 * h);
      const double got = static_cast<const double*>(a.raw_data())[i];
      INFO("element " << i << ": autograd " << got << ", finite differences " << numeric);
      CHECK(std::abs(got - numeric) <= 1e-6 * std::max(1.0, std::abs(numeric)));
    }
  }
}

Tensor r64(IntList sizes, uint64_t seed) {
  manual_seed(seed);
  return randn(sizes, DType::f64);
}
/// Positive values away from 0 (for log, sqrt, pow's base).
Tensor pos64(IntList sizes, uint64_t seed) { return abs(r64(sizes, seed)) + 0.5; }

/// Distinct values (a shuffled 0, 0.1, 0.2, ... centred on 0): no window of a max pool has a
/// tie, and no finite-difference step changes which element is the maximum.
Tensor distinct64(IntList sizes, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(numel_of(sizes)));
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  for (double& e : v)
    e = (e - static_cast<double>(v.size()) / 2) * 0.1;
  return tensor(v, sizes);
}

} // namespace

TEST_CASE("autograd: gradients of pointwise ops match finite differences", "[autograd]") {
  using V = std::vector<Tensor>;
  const Tensor a = r64({3, 4}, 1), b = r64({4}, 2), p = pos64({3, 4}, 3);
  gradcheck("neg abs exp", [](V& x) { return exp(abs(-x[0]) * 0.5); }, {a});
  gradcheck("log sqrt rsqrt", [](V& x) { return log(x[0]) + sqrt(x[0]) + rsqrt(x[0]); }, {p});
  gradcheck("sin cos tanh", [](V& x) { return sin(x[0]) * cos(x[0]) + tanh(x[0]); }, {a});
  gradcheck("sigmoid erf relu", [](V& x) { return sigmoid(x[0]) + erf(x[0]) + relu(x[0]); }, {a});
  gradcheck("add sub mul div, broadcast",
            [](V& x) { return (x[0] + x[1]) * x[0] - x[1] / (x[0] * x[0] + 1.0); }, {a, b});
  gradcheck("pow", [](V& x) { return pow(x[0], x[1]); }, {p, r64({3, 4}, 4)});
  gradcheck("pow by a scalar", [](V& x) { return pow(x[0], 3.0); }, {a});
  gradcheck("maximum minimum", [](V& x) { return maximum(x[0], x[1]) + minimum(x[0], x[1] * 2.0); },
            {a, r64({3, 4}, 5)});
  gradcheck("where", [](V& x) { return where(x[0] > 0.0, x[0] * 3.0, x[1]); }, {a, r64({3, 4}, 6)});
  gradcheck("remainder", [](V& x) { return remainder(x[0], 0.7) + floor_divide(x[0], 0.7); },
            {r64({5}, 7) * 0.1 + 0.3});
  gradcheck("clamp", [](V& x) { return clamp(x[0], -0.5, 0.5); }, {a});
}

TEST_CASE("autograd: gradients of reductions, views and data movement match finite differences",
          "[autograd]") {
  using V = std::vector<Tensor>;
  const Tensor a = r64({3, 4, 5}, 11);
  gradcheck("sum keepdim and not",
            [](V& x) {
              return x[0].sum({0, 2}).sum({0}, true) + x[0].sum({1}, true).sum({1});
            },
            {a});
  gradcheck("mean var", [](V& x) { return x[0].mean({1}) + x[0].var({2}).sum({1}, true); }, {a});
  gradcheck("prod", [](V& x) { return x[0].prod({1}); }, {a});
  {
    // Zeros: slices with none, one and two of them.
    Tensor z = a.clone();
    auto* p = static_cast<double*>(z.raw_data()); // [3, 4, 5]: element (i, j, k) at 20i + 5j + k
    p[0 * 20 + 1 * 5 + 2] = 0;                    // slice (0, ., 2): one zero
    p[1 * 20 + 0 * 5 + 3] = p[1 * 20 + 2 * 5 + 3] = 0; // slice (1, ., 3): two
    gradcheck("prod at zeros", [](V& x) { return x[0].prod({1}) + x[0].prod({}) * 0.5; }, {z});
  }
  gradcheck("amax amin", [](V& x) { return amax(x[0], {2}) - amin(x[0], {0}).sum({1}); }, {a});
  gradcheck("cumsum", [](V& x) { return cumsum(x[0], 1) * x[0]; }, {a});
  gradcheck("softmax log_softmax", [](V& x) { return softmax(x[0], -1) + log_softmax(x[0], 1); },
            {a});
  gradcheck("view permute expand",
            [](V& x) {
              return x[0].view({12, 5}).t().unsqueeze(0).expand({2, 5, 12}) * 2.0;
            },
            {a});
  gradcheck("slice, step 1 and 2",
            [](V& x) { return x[0].slice(1, 1, 3) + x[0].slice(1, 0, 4, 2) * 3.0; }, {a});
  gradcheck("cat and pad (grow and crop)",
            [](V& x) {
              return pad(cat({x[0], x[1] * 2.0}, 0), {1, -2, 0, 1});
            },
            {a, r64({2, 4, 5}, 12)});
  gradcheck(
      "index_select (embedding) and gather",
      [](V& x) {
        Tensor idx = tensor(std::vector<int64_t>{2, 0, 2});
        Tensor g = tensor(std::vector<int64_t>{0, 3, 3, 1, 2, 2, 0, 1, 1, 3, 3, 0}).view({3, 4, 1});
        return index_select(x[0], 0, idx).sum({2}) +
               gather(x[0], 2, g.expand({3, 4, 1}) % 5).sum({2});
      },
      {a});
  gradcheck("embedding",
            [](V& x) {
              return embedding(x[0], tensor(std::vector<int64_t>{1, 1, 0, 3}, {2, 2}));
            },
            {r64({4, 3}, 13)});
  gradcheck("matmul, batched and broadcast", [](V& x) { return matmul(x[0], x[1]); },
            {r64({2, 1, 3, 4}, 14), r64({5, 4, 2}, 15)});
  gradcheck("losses: cross_entropy (ignore_index, label smoothing), BCE with logits",
            [](V& x) {
              const Tensor t = tensor(std::vector<int64_t>{2, -100, 0});
              return cross_entropy(x[0], t, "mean", -100, 0.1) +
                     binary_cross_entropy_with_logits(x[0], full({3, 3}, 0.3, DType::f64), "sum");
            },
            {r64({3, 3}, 20)});
  gradcheck("layer_norm linear gelu",
            [](V& x) { return gelu(linear(layer_norm(x[0], {4}, x[1], x[2]), x[3])); },
            {r64({3, 4}, 16), r64({4}, 17), r64({4}, 18), r64({6, 4}, 19)});
}

TEST_CASE("autograd: gradients of conv2d and the pools match finite differences", "[autograd]") {
  using V = std::vector<Tensor>;
  const Tensor x = r64({2, 4, 7, 6}, 30);
  gradcheck("conv2d: stride 1, padding 1, bias",
            [](V& v) { return conv2d(v[0], v[1], v[2], {1}, {1}); },
            {x, r64({6, 4, 3, 3}, 31), r64({6}, 32)});
  // Output 3 x 2: (6 + 2 - 4 - 1) is odd, so the last input column is never read.
  gradcheck("conv2d: stride 2, padding 1, dilation 2, groups 2, bias",
            [](V& v) { return conv2d(v[0], v[1], v[2], {2}, {1}, {2}, 2); },
            {x, r64({6, 2, 3, 3}, 33), r64({6}, 34)});
  gradcheck("conv2d: stride (2, 3), padding (0, 2), groups 2, no bias",
            [](V& v) {
              return conv2d(v[0], v[1], {}, {2, 3}, {0, 2}, {1, 1}, 2);
            },
            {x, r64({4, 2, 2, 3}, 35)});
  // Padding wider than the kernel: outputs that read only padding.
  gradcheck("conv2d: 1x2 kernel, padding 2, stride (1, 2), unbatched",
            [](V& v) {
              return conv2d(v[0], v[1], v[2], {1, 2}, {2});
            },
            {r64({4, 5, 3}, 36), r64({3, 4, 1, 2}, 37), r64({3}, 38)});
  // Double backward: the input gradient of sum(y^2) is itself differentiated.
  gradcheck("conv2d: double backward",
            [](V& v) {
              const bool outer = is_grad_enabled();
              set_grad_enabled(true);
              const Tensor xi = outer ? v[0] : v[0].detach().requires_grad_(true);
              const Tensor wi = outer ? v[1] : v[1].detach();
              const Tensor y = conv2d(xi, wi, {}, {2}, {1}, {1}, 2);
              const Tensor dx = autograd::grad({(y * y).sum()}, {xi}, {}, std::nullopt, outer)[0];
              set_grad_enabled(outer);
              return dx;
            },
            {r64({1, 4, 5, 4}, 39), r64({2, 2, 3, 2}, 40)});

  const Tensor p = distinct64({2, 3, 7, 6}, 41);
  gradcheck("max_pool2d: kernel 3, stride 2 (overlapping), padding 1",
            [](V& v) { return max_pool2d(v[0], {3}, {2}, {1}); }, {p});
  gradcheck("max_pool2d: kernel (3, 2), stride 1, padding (1, 0), dilation 2",
            [](V& v) {
              return max_pool2d(v[0], {3, 2}, {1}, {1, 0}, {2});
            },
            {p});
  gradcheck("max_pool2d: ceil_mode, unbatched",
            [](V& v) { return max_pool2d(v[0], {3}, {2}, {0}, {1}, true); },
            {distinct64({3, 7, 6}, 42)});
  {
    // A window with NaNs: its maximum is NaN, and its gradient goes to the last NaN (the one
    // PyTorch's kernel keeps); the other windows are untouched.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    Tensor x = tensor(std::vector<double>{1, nan, 7, 2, //
                                          nan, 3, 4, 5},
                      {1, 2, 4})
                   .requires_grad_();
    Tensor y = max_pool2d(x, {2}, {2}); // two windows: {1, nan, nan, 3} and {7, 2, 4, 5}
    REQUIRE(std::isnan(y.to_vector<double>()[0]));
    y.sum().backward();
    CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0, 1, 0, 1, 0, 0, 0});
  }

  const Tensor q = r64({2, 3, 7, 6}, 43);
  for (const bool include_pad : {true, false}) {
    for (const bool ceil : {false, true}) {
      gradcheck(std::string("avg_pool2d: kernel 3, stride 2, padding 1, count_include_pad ") +
                    (include_pad ? "true" : "false") + ", ceil_mode " + (ceil ? "true" : "false"),
                [&](V& v) { return avg_pool2d(v[0], {3}, {2}, {1}, ceil, include_pad); }, {q});
    }
  }
  gradcheck("avg_pool2d: kernel (2, 3), stride (1, 2), padding (1, 0), unbatched",
            [](V& v) {
              return avg_pool2d(v[0], {2, 3}, {1, 2}, {1, 0}, false, false);
            },
            {r64({3, 5, 7}, 44)});

  // In f32 (the library's convolution where it has one) the gradients are the f64 ones.
  const std::vector<std::function<Tensor(V&)>> fns{
      [](V& v) { return conv2d(v[0], v[1], {}, {2}, {1}, {2}, 2); },
      [](V& v) { return max_pool2d(v[0] * v[1].sum(), {3}, {2}, {1}); },
      [](V& v) { return avg_pool2d(v[0] * v[1].sum(), {3}, {2}, {1}, true, false); }};
  for (size_t f = 0; f < fns.size(); ++f) {
    INFO("function " << f);
    std::vector<std::vector<Tensor>> grads;
    for (const DType t : {DType::f64, DType::f32}) {
      V v{distinct64({2, 4, 7, 6}, 46).to(t).requires_grad_(),
          r64({6, 2, 3, 3}, 45).to(t).requires_grad_()};
      const Tensor y = fns[f](v);
      grads.push_back(autograd::grad({(y * y).sum()}, v));
    }
    for (size_t k = 0; k < 2; ++k) {
      const Tensor d = abs(grads[1][k].to(DType::f64) - grads[0][k]).max();
      CHECK(d.item<double>() <= 1e-4 * std::max(1.0, abs(grads[0][k]).max().item<double>()));
    }
  }
}

TEST_CASE("autograd: gradients of scatter match finite differences", "[autograd]") {
  using V = std::vector<Tensor>;
  // Repeated targets along dim 0 (the last write wins): a's gradient only.
  gradcheck("scatter: a, repeated targets",
            [](V& v) {
              const Tensor idx = tensor(std::vector<int64_t>{0, 3, 3, 1, 0, 0, 3, 1}, {2, 4});
              return scatter(v[0], 0, idx, full({2, 5}, 7.0, DType::f64)) * v[0];
            },
            {r64({4, 5}, 50)});
  // Distinct targets per line; src larger than the index (its other elements are unread).
  gradcheck("scatter: a and src, dim 1",
            [](V& v) {
              const Tensor idx = tensor(std::vector<int64_t>{4, 0, 2, 1, 3, 4, 0, 2, 3}, {3, 3});
              return scatter(v[0], 1, idx, v[1]);
            },
            {r64({3, 5}, 51), r64({4, 4}, 52)});
  // The overwritten places get no gradient; src's gradient is gathered at the index.
  Tensor a = zeros({2, 3}, DType::f64).requires_grad_();
  Tensor src = ones({1, 2}, DType::f64).requires_grad_();
  const Tensor idx = tensor(std::vector<int64_t>{2, 0}, {1, 2});
  const Tensor w = tensor(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  (scatter(a, 1, idx, src) * w).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0, 2, 0, 4, 5, 6});
  CHECK(src.grad().to_vector<double>() == std::vector<double>{3, 1});
}

TEST_CASE("autograd: leaves accumulate, retain_grad keeps an inner gradient", "[autograd]") {
  Tensor x = tensor(std::vector<float>{1, 2, 3}).requires_grad_();
  CHECK(x.is_leaf());
  Tensor y = x * x;
  CHECK_FALSE(y.is_leaf());
  CHECK(y.requires_grad());
  CHECK(autograd::grad_fn_name(y) == "MulBackward");
  y.retain_grad();
  Tensor loss = (y * 2.0).sum();
  loss.backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{4, 8, 12}); // 2 * 2x
  CHECK(y.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
  CHECK_FALSE(x.grad().requires_grad());
  // A second graph accumulates into the leaf.
  (x * 3.0).sum().backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{7, 11, 15});
  // The first graph's saved tensors are gone.
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("backward through the graph a second time"));
  // retain_graph keeps them.
  x.set_grad(Tensor());
  Tensor l2 = (x * x).sum();
  l2.backward({}, true);
  l2.backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{4, 8, 12});
  // A non-scalar output needs its gradient.
  CHECK_THROWS_WITH((x * 2.0).backward(), Catch::Contains("pass the output's gradient"));
}

TEST_CASE("autograd: a leaf's first gradient is taken as it is only when nothing else holds it",
          "[autograd]") {
  SECTION("a fresh gradient becomes .grad() without a copy") {
    manual_seed(3);
    Tensor w = randn({512, 512}).requires_grad_();
    const Tensor x = randn({1, 512});
    Tensor loss = matmul(x, w).sum();
    const size_t live = cpu_memory_stats().allocated;
    reset_cpu_peak_memory();
    loss.backward();
    // dL/dw = x^T 1: one 1 MiB product, which becomes the gradient; a copy would double it.
    const size_t extra = cpu_memory_stats().peak_allocated - live;
    INFO("extra " << extra << " bytes");
    CHECK(extra < (size_t{3} << 19));
    const Tensor want = matmul(transpose(x, 0, 1), ones({1, 512}));
    CHECK(check_accuracy(w.grad(), want, Tensor()) == std::nullopt);
  }
  SECTION("a gradient shared with a retained one is copied") {
    Tensor w = tensor(std::vector<float>{1, 2, 3}).requires_grad_();
    Tensor h = w + 0.0; // h's gradient passes to w unchanged
    h.retain_grad();
    (h * 2.0).sum().backward();
    CHECK(w.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
    CHECK(h.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
    w.grad().zero_(); // .grad() is the leaf's own: the retained gradient keeps its values
    CHECK(h.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
  }
}

TEST_CASE("autograd: autograd::grad, unused inputs and double backward", "[autograd]") {
  Tensor x = tensor(std::vector<double>{0.5, -1.0, 2.0}).requires_grad_();
  Tensor z = tensor(std::vector<double>{1.0}).requires_grad_();
  Tensor y = (x * x * x).sum();
  std::vector<Tensor> g = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
  CHECK(g[0].to_vector<double>() == std::vector<double>{0.75, 3.0, 12.0}); // 3x^2
  CHECK(g[0].requires_grad());
  CHECK_FALSE(x.grad().defined()); // grad() does not accumulate
  std::vector<Tensor> gg = autograd::grad({g[0].sum()}, {x});
  CHECK(gg[0].to_vector<double>() == std::vector<double>{3.0, -6.0, 12.0}); // 6x
  CHECK_THROWS_WITH(autograd::grad({(x * 2.0).sum()}, {x, z}), Catch::Contains("not used"));
  std::vector<Tensor> u = autograd::grad({(x * 2.0).sum()}, {x, z}, {}, std::nullopt, false, true);
  CHECK_FALSE(u[1].defined());
}

TEST_CASE("autograd: in-place ops follow PyTorch's rules", "[autograd]") {
  Tensor w = tensor(std::vector<float>{1, 2}).requires_grad_();
  CHECK_THROWS_WITH(w.add_(1.0), Catch::Contains("a leaf tensor that requires grad is being used "
                                                 "in an in-place operation"));
  {
    NoGradGuard no_grad;
    w.add_(1.0); // as an optimizer step does
  }
  CHECK(w.to_vector<float>() == std::vector<float>{2, 3});
  // On a non-leaf: its history continues through the write.
  Tensor y = w * 3.0;
  y.mul_(w); // y = 3w * w: dy/dw = 6w
  y.add_(1.0);
  CHECK(autograd::grad_fn_name(y) == "AddBackward");
  y.sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{12, 18});
  // Overwritten by an op without a derivative: the old history no longer feeds it.
  w.set_grad(Tensor());
  Tensor f = w * 2.0;
  f.fill_(3.0);
  (f * w).sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{3, 3});
  // A tensor saved for backward and then changed in place.
  Tensor a = w * 1.0;
  Tensor e = exp(a); // saves its result
  e.add_(1.0);
  Tensor s = (a * a).sum(); // saves a
  a.mul_(2.0);
  CHECK_THROWS_WITH(s.backward(), Catch::Contains("modified by an inplace operation") &&
                                      Catch::Contains("MulBackward"));
}

TEST_CASE("autograd: in-place writes through views match finite differences (CopySlices)",
          "[autograd]") {
  using V = std::vector<Tensor>;
  const Tensor a = r64({4, 5}, 31), b = r64({2, 5}, 32), c = r64({5, 2}, 33);
  gradcheck("a slice of a fresh buffer written with copy_ (the base had no history)",
            [](V& x) {
              Tensor buf = zeros({6, 5}, DType::f64);
              buf.slice(0, 1, 3).copy_(x[1] * 3.0);
              buf.slice(0, 4, 6).copy_(exp(x[1]));
              return buf * buf + x[0].sum();
            },
            {a, b});
  gradcheck("mul_ and add_ through a stepped slice of a tensor with history",
            [](V& x) {
              Tensor y = x[0] * 2.0;
              y.slice(0, 0, 4, 2).mul_(x[1]); // rows 0 and 2
              y.slice(1, 1, 3).add_(sin(x[0].slice(1, 0, 2)));
              return y * x[0];
            },
            {a, b});
  gradcheck("a write through a view of a view (transpose, narrow, select)",
            [](V& x) {
              Tensor y = x[0] * 2.0; // (exp would save y: writing it is then an error)
              y.t().narrow(1, 1, 2).copy_(x[1] *
                                          exp(y.t().narrow(1, 2, 2))); // reads what it writes
              y.select(1, 4).mul_(x[0].select(1, 0));
              return y;
            },
            {a, c});
  gradcheck("a view made before the write sees it; the written view itself goes on",
            [](V& x) {
              Tensor y = x[0] * 1.0;
              Tensor rows = y.slice(0, 1, 3); // overlaps the write below in row 1
              Tensor head = y.slice(0, 0, 2);
              head.mul_(y.slice(0, 2, 4)); // rows 0-1 times rows 2-3
              head.add_(1.0);
              return rows * 2.0 + head.sum({0}, true);
            },
            {a});
  gradcheck("a base written in place after its view was taken",
            [](V& x) {
              Tensor y = x[0] * 1.0;
              Tensor v = y.view({20}).slice(0, 3, 9);
              y.mul_(x[0]);
              return v * v;
            },
            {a});

  Tensor w = r64({3, 4}, 34).requires_grad_();
  Tensor y = w * 1.0;
  y.slice(1, 0, 2).mul_(3.0);
  CHECK(autograd::grad_fn_name(y) == "CopySlices");
  CHECK(autograd::grad_fn_name(y.slice(1, 0, 2)) == "SliceBackward");
  // As in PyTorch: a leaf's view can't be written in place with grad mode on, nor can a view
  // whose elements overlap.
  CHECK_THROWS_WITH(w.slice(0, 0, 1).mul_(2.0),
                    Catch::Contains("mul: a view of a leaf tensor that requires grad is being used "
                                    "in an in-place operation"));
  Tensor col = (w * 1.0).slice(1, 0, 1);
  CHECK_THROWS_WITH(col.expand({3, 4}).mul_(2.0),
                    Catch::Contains("more than one element of the written-to tensor"));
  {
    NoGradGuard no_grad;
    w.slice(0, 0, 1).mul_(2.0); // as an optimizer writes a part of a parameter
  }
  // A buffer that a view write gave history can be read through an older view: it requires
  // grad then too.
  Tensor x = tensor(std::vector<double>{1.0, 2.0}).requires_grad_();
  Tensor buf = zeros({2, 2}, DType::f64);
  Tensor second_row = buf.select(0, 1);
  buf.select(0, 0).copy_(x);
  second_row.copy_(x * x);
  CHECK(buf.requires_grad());
  buf.sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3.0, 5.0}); // 1 + 2x
  // A view made under NoGradGuard has no base autograd knows of: a recorded write through it
  // (or through a view of it) is an error, as in PyTorch; under NoGradGuard it is not.
  Tensor other = zeros({2, 2}, DType::f64), row;
  {
    NoGradGuard no_grad;
    row = other.select(0, 1);
  }
  CHECK_THROWS_WITH(row.copy_(x), Catch::Contains("copy: a view made with grad mode off"));
  CHECK_THROWS_WITH(row.narrow(0, 0, 1).mul_(x.narrow(0, 0, 1)),
                    Catch::Contains("a view made with grad mode off"));
  row.mul_(2.0); // nothing to record
  {
    NoGradGuard no_grad;
    row.copy_(x);
  }
  CHECK(other.to_vector<double>() == std::vector<double>{0, 0, 1, 2});
}

TEST_CASE("autograd: NoGradGuard and InferenceMode record nothing", "[autograd]") {
  Tensor w = ones({2}).requires_grad_();
  {
    NoGradGuard no_grad;
    Tensor y = w * 2.0;
    CHECK_FALSE(y.requires_grad());
  }
  Tensor made;
  {
    InferenceMode inference;
    CHECK(InferenceMode::is_enabled());
    made = w * 2.0;
    CHECK_FALSE(made.requires_grad());
    CHECK(autograd::is_inference(made));
  }
  CHECK_FALSE(InferenceMode::is_enabled());
  CHECK_THROWS_WITH(made.requires_grad_(), Catch::Contains("inference tensor"));
  CHECK_THROWS_WITH(w * made, Catch::Contains("inference tensor"));
  CHECK_FALSE(autograd::is_inference(w * 2.0));
}

TEST_CASE("autograd: a module's parameters get their gradients", "[autograd]") {
  manual_seed(0);
  nn::Linear lin(4, 3);
  lin.to(DType::f64);
  Tensor x = r64({5, 4}, 21);
  Tensor loss = (lin.forward(x) * lin.forward(x)).mean();
  loss.backward();
  // d mean(y^2) / dW = 2/15 * y^T x, d/db = 2/15 * sum(y).
  NoGradGuard no_grad;
  const Tensor y = linear(x, lin.weight, lin.bias);
  const Tensor gw = matmul(y.t(), x) * (2.0 / 15.0), gb = y.sum({0}) * (2.0 / 15.0);
  const Tensor dw = abs(lin.weight.grad() - gw).max(), db = abs(lin.bias.grad() - gb).max();
  CHECK(dw.item<double>() < 1e-12);
  CHECK(db.item<double>() < 1e-12);
}
