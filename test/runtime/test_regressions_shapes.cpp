// Regression and edge-case tests for reductions, views, data movement, contractions, nn and
// safetensors: the cases a review found worth pinning (views of views, NaN/tie rules, empty
// dims, stride-0 operands through oneDNN, fuzzed safetensors files).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include <kiln/kiln.h>

#include "runtime/nn/nn.h"
#include "tensor_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

/// Exact element-wise comparison that treats NaN == NaN.
void check_same(const Tensor& got, const Tensor& want) {
  REQUIRE(got.sizes() == want.sizes());
  auto g = got.to(DType::f64).to_vector<double>();
  auto w = want.to(DType::f64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i);
    if (std::isnan(w[i]))
      CHECK(std::isnan(g[i]));
    else
      CHECK(g[i] == w[i]);
  }
}

} // namespace

// ---- views ----

TEST_CASE("regressions: slice of a transpose of an expand keeps offsets and strides", "[regr]") {
  Tensor base = iota_f32(6);                     // 0..5
  Tensor row = base.slice(0, 2, 5);              // [2,3,4], offset 2
  Tensor e = row.expand({4, 3});                 // strides [0, 1]
  Tensor t = e.transpose(0, 1);                  // [3, 4], strides [1, 0]
  Tensor s = t.slice(0, 1, 3).slice(1, 1, 4, 2); // rows 1..2, cols 1,3
  CHECK(s.sizes() == Shape{2, 2});
  CHECK(s.storage_offset() == 3);
  CHECK(vals(s) == std::vector<float>{3, 3, 4, 4});
  CHECK(vals(s.contiguous()) == std::vector<float>{3, 3, 4, 4});
  CHECK(vals(sum(s, {1})) == std::vector<float>{6, 8});
}

TEST_CASE("regressions: view after permute where dims stay contiguous", "[regr]") {
  Tensor x = iota_f32(24).view({2, 3, 4});
  Tensor p = x.permute({2, 0, 1}); // [4, 2, 3], strides [1, 12, 4]
  Tensor v = p.view({4, 6});       // dims 1, 2 merge (12 == 3 * 4)
  CHECK(v.strides() == Shape{1, 4});
  check_same(v, p.contiguous().view({4, 6}));
  CHECK_THROWS_WITH(p.view({24}), Catch::Contains("view"));
  check_same(p.reshape({24}), p.contiguous().view({24}));
  // Unsqueeze of a sliced, offset view keeps the offset.
  Tensor sl = x.slice(2, 1, 3);
  check_same(sl.unsqueeze(1).squeeze(1), sl);
  CHECK(sl.unsqueeze(-1).storage_offset() == 1);
}

// ---- reductions ----

TEST_CASE("regressions: reductions over permuted/expanded inputs with dims in any order",
          "[regr]") {
  Tensor x = grid({3, 4, 5}, 7).permute({2, 0, 1}); // [5, 3, 4]
  Tensor xc = x.contiguous();
  for (bool keep : {false, true}) {
    check_same(sum(x, {2, 0}, keep), sum(xc, {0, 2}, keep));
    check_same(amax(x, {-1, 0}, keep), amax(xc, {0, 2}, keep));
    check_same(amin(x, {1, 2}, keep), amin(xc, {1, 2}, keep));
    check_same(prod(x, {1}, keep), prod(xc, {1}, keep));
  }
  Tensor e = grid({1, 4}, 3).expand({6, 4}); // stride-0 rows
  check_same(sum(e, {0}), mul(grid({4}, 3), scalar_tensor(6.0f)));
  check_same(sum(e.t(), {1}, true), mul(grid({4}, 3), scalar_tensor(6.0f)).unsqueeze(1));
  check_same(argmax(e, 0), zeros({4}, DType::i64));
}

TEST_CASE("regressions: argmax/argmin ties pick the first, NaN wins at its first position",
          "[regr]") {
  CHECK(argmax(tensor<float>({1, 3, 3, 0})).item<int64_t>() == 1);
  CHECK(argmin(tensor<float>({2, 0, 5, 0})).item<int64_t>() == 1);
  CHECK(argmax(tensor<float>({1, kNaN, 5, kNaN})).item<int64_t>() == 1);
  CHECK(argmin(tensor<float>({1, 5, kNaN, -3})).item<int64_t>() == 2);
  // Column path (reduced dim strided, kept dim dense).
  Tensor m = tensor<float>({1, 2, 7, kNaN, 0, 7, 3, kNaN, 1}, {3, 3});
  CHECK(argmax(m, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0});
  CHECK(argmin(m, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 2});
  // Row path through a transpose.
  CHECK(argmax(m.t(), 1).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0});
  CHECK(amax(m, {0}).to_vector<float>()[1] != amax(m, {0}).to_vector<float>()[1]); // NaN
  CHECK(argmax(m, std::nullopt, true).sizes() == Shape{1, 1});
}

TEST_CASE("regressions: empty reductions", "[regr]") {
  Tensor z = zeros({2, 0, 3});
  check_same(sum(z, {1}), zeros({2, 3}));
  check_same(sum(z, {1}, true), zeros({2, 1, 3}));
  CHECK(sum(z, {0}).sizes() == Shape{0, 3});
  check_same(prod(z, {1}), ones({2, 3}));
  CHECK_THROWS_WITH(amax(z, {1}), Catch::Contains("amax"));
  CHECK_THROWS_WITH(max(z), Catch::Contains("max"));
  CHECK(amax(z, {0}).sizes() == Shape{0, 3});
  Tensor mn = mean(z, {1});
  CHECK(mn.sizes() == Shape{2, 3});
  CHECK(std::isnan(vals(mn)[0]));
  CHECK_THROWS_WITH(argmax(z, 1), Catch::Contains("argmax"));
  CHECK_THROWS_WITH(argmax(z), Catch::Contains("argmax"));
  CHECK(cumsum(z, 1).sizes() == Shape{2, 0, 3});
  CHECK(sum(zeros({0}, DType::i32)).dtype() == DType::i64);
}

TEST_CASE("regressions: integer sums accumulate in i64", "[regr]") {
  Tensor x = full({4}, Scalar(int64_t{2000000000}), DType::i32);
  Tensor s = sum(x);
  CHECK(s.dtype() == DType::i64);
  CHECK(s.item<int64_t>() == 8000000000LL);
  CHECK(cumsum(x, 0).to_vector<int64_t>().back() == 8000000000LL);
  CHECK(sum(tensor<bool>({true, true, false})).item<int64_t>() == 2);
  CHECK(prod(full({3}, Scalar(int64_t{100000}), DType::i32)).item<int64_t>() == 1000000000000000LL);
}

TEST_CASE("regressions: softmax/log_softmax with -inf and large values", "[regr]") {
  Tensor x = tensor<float>({0, -kInf, -kInf, -kInf, 1000, 0}, {2, 3});
  // Row 0: one finite value gets all the mass; -inf entries get exactly 0.
  Tensor s = softmax(x, 1);
  auto v = vals(s);
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == 0.0f);
  CHECK(v[3] == 0.0f);
  CHECK(v[4] == 1.0f);
  Tensor all = softmax(full({2}, Scalar(-kInf)), 0);
  CHECK(std::isnan(vals(all)[0]));
  CHECK(std::isnan(vals(log_softmax(full({2}, Scalar(-kInf)), 0))[0]));
  auto l = vals(log_softmax(x, 1));
  CHECK(l[0] == 0.0f);
  CHECK(l[1] == -kInf);
  CHECK(l[3] == -kInf);
  CHECK(l[4] == 0.0f);
  CHECK(l[5] == -1000.0f);
  // Through a non-contiguous view, softmax along dim 0 of the transpose.
  check_same(softmax(x.t(), 0), softmax(x, 1).t());
}

TEST_CASE("regressions: var/std with correction >= n", "[regr]") {
  Tensor x = tensor<float>({1, 2});
  CHECK(vals(var(x))[0] == 0.5f);
  CHECK(vals(var(x, {}, false, 2))[0] == kInf);
  CHECK(vals(var(x, {}, false, 3))[0] == kInf);
  CHECK(std::isnan(vals(var(tensor<float>({5}), {}, false, 1))[0]));
  CHECK(vals(var(x, {}, false, 0))[0] == 0.25f);
  // Over a strided, keepdim view.
  Tensor m = tensor<float>({1, 10, 3, 10, 5, 10}, {3, 2});
  check_same(var(m.t(), {1}, true), tensor<float>({4, 0}, {2, 1}));
}

TEST_CASE("regressions: cumsum on strided and expanded inputs", "[regr]") {
  Tensor m = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  check_same(cumsum(m.t(), 0), tensor<float>({1, 4, 3, 9, 6, 15}, {3, 2}));
  check_same(cumsum(m.slice(1, 0, 3, 2), 1), tensor<float>({1, 4, 4, 10}, {2, 2}));
  check_same(cumsum(tensor<float>({2}).expand({3}), 0), tensor<float>({2, 4, 6}));
  check_same(cumsum(scalar_tensor(3.0f), 0), scalar_tensor(3.0f));
}

// ---- data movement ----

TEST_CASE("regressions: cat with mixed dtypes and non-contiguous inputs", "[regr]") {
  Tensor a = tensor<int32_t>({1, 2, 3, 4}, {2, 2}).t();                // [[1,3],[2,4]]
  Tensor b = tensor<float>({0.5f, 9, 1.5f, 9}, {2, 2}).slice(1, 0, 1); // [[0.5],[1.5]]
  Tensor c = cat({a, b}, 1);
  CHECK(c.dtype() == DType::f32);
  check_same(c, tensor<float>({1, 3, 0.5f, 2, 4, 1.5f}, {2, 3}));
  Tensor d = cat({b.t(), tensor<double>({7}, {1, 1}).expand({1, 2})}, 0);
  CHECK(d.dtype() == DType::f64);
  check_same(d, tensor<double>({0.5, 1.5, 7, 7}, {2, 2}));
  check_same(cat({zeros({0}), tensor<float>({1, 2}, {1, 2})}, 0), tensor<float>({1, 2}, {1, 2}));
}

TEST_CASE("regressions: index ops with i32 indices reject bad values", "[regr]") {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor xt = x.t(); // [3, 2]
  check_same(index_select(xt, 0, tensor<int32_t>({2, 0})), tensor<float>({3, 6, 1, 4}, {2, 2}));
  CHECK_THROWS_WITH(index_select(x, 1, tensor<int32_t>({3})), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(index_select(x, 1, tensor<int32_t>({-1})), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(index_select(x, 0, tensor<float>({0})), Catch::Contains("index"));
  check_same(gather(xt, 1, tensor<int32_t>({1, 0, 0}, {3, 1})), tensor<float>({4, 2, 3}, {3, 1}));
  CHECK_THROWS_WITH(gather(x, 1, tensor<int32_t>({3}, {1, 1})), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(gather(x, 0, tensor<int64_t>({-2}, {1, 1})), Catch::Contains("out of range"));
  Tensor src = tensor<float>({10, 20, 30, 40}, {2, 2});
  check_same(scatter(x, 1, tensor<int32_t>({2, 0}, {2, 1}), src),
             tensor<float>({1, 2, 10, 30, 5, 6}, {2, 3}));
  CHECK_THROWS_WITH(scatter(x, 1, tensor<int32_t>({3}, {1, 1}), src),
                    Catch::Contains("out of range"));
  CHECK_THROWS_WITH(scatter(x, 0, tensor<int32_t>({-1}, {1, 1}), src),
                    Catch::Contains("out of range"));
  // Scatter into a non-contiguous input with a non-contiguous src.
  check_same(scatter(xt, 0, tensor<int64_t>({2}, {1, 1}), src.t()),
             tensor<float>({1, 4, 2, 5, 10, 6}, {3, 2}));
}

TEST_CASE("regressions: pad with negative pads", "[regr]") {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  check_same(pad(x, {-1, 1}), tensor<float>({2, 3, 0, 5, 6, 0}, {2, 3}));
  check_same(pad(x, {2, -2}, 9), tensor<float>({9, 9, 1, 9, 9, 4}, {2, 3}));
  check_same(pad(x.t(), {0, 0, -1, -1}), tensor<float>({2, 5}, {1, 2}));
  CHECK_THROWS_WITH(pad(x, {-2, -2}), Catch::Contains("pad"));
  CHECK_THROWS_WITH(pad(x, {0, 0, 0, 0, 1, 1}), Catch::Contains("pad"));
  // A crop larger than the dim is an error even when padding on the other side makes the
  // output size non-negative (PyTorch's narrow of the input fails there too).
  CHECK_THROWS_WITH(pad(x, {-4, 3}, 7), Catch::Contains("crops more than the size 3"));
  CHECK_THROWS_WITH(pad(x, {3, -4}, 7), Catch::Contains("crops more than the size 3"));
  CHECK_THROWS_WITH(pad(x, {1, -4}), Catch::Contains("crops more than the size 3"));
  CHECK(pad(x, {-3, 0}).sizes() == Shape{2, 0});
  check_same(pad(x, {-3, 2}, 7), full({2, 2}, Scalar(7.0f)));
}

// ---- contractions ----

TEST_CASE("regressions: matmul with transposed, sliced and stride-0 operands (oneDNN vs loop)",
          "[regr]") {
  Tensor a0 = grid({5, 7}, 1);
  Tensor b0 = grid({7, 6}, 2);
  std::vector<std::pair<Tensor, Tensor>> cases = {
      {a0, b0},
      {grid({7, 5}, 3).t(), grid({6, 7}, 4).t()},
      {a0.slice(0, 1, 5, 2), b0.slice(1, 1, 6)},
      {a0.slice(1, 2, 7), b0.slice(0, 2, 7)},
      {grid({1, 7}, 5).expand({5, 7}), grid({7, 1}, 6).expand({7, 6})},
      {grid({5, 1}, 7).expand({5, 7}), grid({1, 6}, 8).expand({7, 6})},
      {grid({2, 1, 5, 7}, 9).expand({2, 3, 5, 7}), grid({3, 7, 6}, 10)},
      {grid({3, 5, 7}, 11).slice(2, 0, 7, 1).transpose(1, 2).transpose(1, 2), b0.t().t()},
      {grid({5, 0}, 1), grid({0, 6}, 1)},
      {grid({7}, 12), grid({4, 7, 3}, 13).transpose(1, 2).transpose(1, 2)},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    const auto& [a, b] = cases[i];
    Tensor ref;
    {
      OnednnMode off(false);
      ref = matmul(a, b);
    }
    Tensor got = matmul(a, b);
    check_same(got, ref);
    // The loop against a dense reference.
    OnednnMode off(false);
    check_same(ref, matmul(a.contiguous(), b.contiguous()));
  }
  CHECK(vals(matmul(grid({3, 0}, 1), grid({0, 2}, 1))) == std::vector<float>(6, 0.0f));
}

TEST_CASE("regressions: conv2d with groups and non-contiguous input/weight", "[regr]") {
  Tensor x = grid({2, 5, 4, 4}, 21).permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  x = x.slice(1, 0, 4);                              // [2, 4, 4, 4], channels strided, offset 0
  Tensor w = grid({6, 2, 3, 3}, 22).transpose(2, 3); // non-contiguous
  Tensor b = grid({12}, 23).slice(0, 0, 12, 2);      // strided bias
  Tensor ref;
  {
    OnednnMode off(false);
    ref = conv2d(x, w, b, {1}, {1}, {1}, 2);
  }
  check_same(conv2d(x, w, b, {1}, {1}, {1}, 2), ref);
  check_same(conv2d(x.contiguous(), w.contiguous(), b.contiguous(), {1}, {1}, {1}, 2), ref);
  // A hand value: group 1 output channel 3 at (0, 0) of image 0.
  double acc = vals(b)[3];
  auto xv = x.contiguous().to_vector<float>();
  auto wv = w.contiguous().to_vector<float>();
  for (int c = 0; c < 2; ++c)
    for (int ky = 0; ky < 3; ++ky)
      for (int kx = 0; kx < 3; ++kx) {
        int iy = ky - 1, ix = kx - 1;
        if (iy < 0 || ix < 0) continue;
        acc += static_cast<double>(wv[((3 * 2 + c) * 3 + ky) * 3 + kx]) *
               xv[(((0 * 4) + 2 + c) * 4 + iy) * 4 + ix];
      }
  CHECK(vals(ref)[3 * 16] == static_cast<float>(acc));
}

TEST_CASE("regressions: pooling ceil_mode edge rules", "[regr]") {
  // 5 wide, k=2, s=2, ceil: 3 outputs; the last window holds one element.
  Tensor x = tensor<float>({1, 2, 3, 4, 5}, {1, 1, 5}).unsqueeze(0).transpose(2, 3).transpose(2, 3);
  Tensor mp = max_pool2d(x, {1, 2}, {1, 2}, {0}, {1}, true);
  CHECK(vals(mp) == std::vector<float>{2, 4, 5});
  Tensor ap = avg_pool2d(x, {1, 2}, {1, 2}, {0}, true, true);
  CHECK(vals(ap) == std::vector<float>{1.5f, 3.5f, 5});
  // With padding 1, k=2, s=2 over 4: floor gives 3, ceil 3 (a window starting in the right
  // padding is dropped).
  Tensor y = tensor<float>({1, 2, 3, 4}, {1, 1, 1, 4});
  CHECK(max_pool2d(y, {1, 2}, {1, 2}, {0, 1}, {1}, true).size(-1) == 3);
  CHECK(vals(avg_pool2d(y, {1, 2}, {1, 2}, {0, 1}, true, true)) ==
        std::vector<float>{0.5f, 2.5f, 2});
  CHECK(vals(avg_pool2d(y, {1, 2}, {1, 2}, {0, 1}, true, false)) == std::vector<float>{1, 2.5f, 4});
}

// ---- nn functional ----

TEST_CASE("regressions: batch_norm running statistics use the unbiased variance", "[regr]") {
  Tensor x = tensor<float>({1, 2, 3, 5}, {2, 2, 1}); // channel 0: 1, 3; channel 1: 2, 5
  Tensor rm = zeros({2}), rv = ones({2});
  Tensor y = batch_norm(x, rm, rv, {}, {}, true, 0.5, 0.0);
  check_same(rm, tensor<float>({1, 1.75f}));
  // Unbiased var of {1, 3} = 2, of {2, 5} = 4.5.
  check_same(rv, tensor<float>({1.5f, 2.75f}));
  auto v = vals(y);
  CHECK(v[0] == Approx(-1.0f));
  CHECK(v[2] == Approx(1.0f));
}

TEST_CASE("regressions: layer_norm over several trailing dims", "[regr]") {
  Tensor x = tensor<float>({1, 2, 3, 4, 10, 10, 10, 14}, {2, 2, 2});
  Tensor w = tensor<float>({1, 2, 1, 1}, {2, 2});
  Tensor y = layer_norm(x.transpose(1, 2).transpose(1, 2), {2, 2}, w, {}, 0.0);
  auto v = vals(y);
  const float s = 1.0f / std::sqrt(1.25f);
  CHECK(v[0] == Approx(-1.5f * s));
  CHECK(v[1] == Approx(2 * -0.5f * s));
  CHECK(v[7] == Approx(std::sqrt(3.0f)));
  CHECK_THROWS_WITH(layer_norm(x, {2, 3}), Catch::Contains("layer_norm"));
}

TEST_CASE("regressions: cross_entropy with [N, C, d] logits", "[regr]") {
  Tensor logits = tensor<float>({0, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0}, {2, 3, 2});
  Tensor target = tensor<int64_t>({2, 0, 1, 1}, {2, 2});
  Tensor none = cross_entropy(logits, target, "none");
  CHECK(none.sizes() == Shape{2, 2});
  auto lse = [](std::vector<double> v) {
    double m = 0;
    for (double x : v)
      m += std::exp(x);
    return std::log(m);
  };
  auto n = vals(none);
  CHECK(n[0] == Approx(lse({0, 2, 4}) - 4));
  CHECK(n[1] == Approx(lse({1, 3, 5}) - 1));
  CHECK(n[2] == Approx(std::log(3.0)));
  CHECK(vals(cross_entropy(logits, target))[0] == Approx((n[0] + n[1] + n[2] + n[3]) / 4));
  CHECK_THROWS_WITH(cross_entropy(logits, tensor<int64_t>({3, 0, 1, 1}, {2, 2})),
                    Catch::Contains("out of bounds"));
}

TEST_CASE("regressions: sdpa causal mask aligns top-left when L != S", "[regr]") {
  // q: L = 2, k/v: S = 3; zero q makes every score 0, so the output is the mean of the
  // visible values.
  Tensor q = zeros({2, 4});
  Tensor k = grid({3, 4}, 31);
  Tensor v = tensor<float>({1, 2, 4}, {3, 1});
  Tensor o = scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  CHECK(vals(o) == std::vector<float>{1, 1.5f});
  // L > S: every row sees at least key 0.
  Tensor o2 = scaled_dot_product_attention(zeros({4, 4}), k.slice(0, 0, 2), v.slice(0, 0, 2), {},
                                           0.0, true);
  CHECK(vals(o2) == std::vector<float>{1, 1.5f, 1.5f, 1.5f});
}

// ---- nn modules ----

namespace {
struct TwoLayer : nn::Module {
  nn::Linear fc{3, 2};
  nn::BatchNorm1d bn{2};
  TwoLayer() {
    register_module("fc", fc);
    register_module("bn", bn);
  }
  Tensor forward(const Tensor& x) override { return bn(fc(x)); }
};
} // namespace

TEST_CASE("regressions: load_state_dict strictness, shape mismatch and to(dtype)", "[regr]") {
  TwoLayer m;
  nn::StateDict sd = m.state_dict();
  CHECK(sd.count("bn.num_batches_tracked") == 1);
  TwoLayer other;
  nn::StateDict changed;
  for (auto& [k, t] : sd)
    changed[k] = add(t.detach().to(DType::f64), Scalar(1.0)).to(t.dtype());
  Tensor w_before = other.fc.weight; // a handle taken earlier sees the load
  CHECK(other.load_state_dict(changed).ok());
  check_same(w_before, changed["fc.weight"]);
  check_same(other.bn.running_var, full({2}, Scalar(2.0f)));

  nn::StateDict partial = changed;
  partial.erase("fc.bias");
  partial["extra"] = zeros({1});
  CHECK_THROWS_WITH(other.load_state_dict(partial),
                    Catch::Contains("fc.bias") && Catch::Contains("extra"));
  nn::LoadReport r = other.load_state_dict(partial, false);
  CHECK(r.missing_keys == std::vector<std::string>{"fc.bias"});
  CHECK(r.unexpected_keys == std::vector<std::string>{"extra"});
  nn::StateDict bad = changed;
  bad["fc.weight"] = zeros({3, 2});
  Tensor before = other.fc.bias.clone();
  bad["fc.bias"] = full({2}, Scalar(42.0f));
  CHECK_THROWS_WITH(other.load_state_dict(bad, false), Catch::Contains("fc.weight"));
  check_same(other.fc.bias, before); // nothing written

  m.to(DType::f64);
  CHECK(m.fc.weight.dtype() == DType::f64);
  CHECK(m.fc.weight.requires_grad());
  CHECK(m.bn.num_batches_tracked.dtype() == DType::i64);
  auto params = m.named_parameters();
  REQUIRE(params.size() == 4);
  CHECK(params[0].second.dtype() == DType::f64);
  CHECK(m.state_dict()["bn.running_mean"].dtype() == DType::f64);
  // Loading f32 values into the f64 model casts them.
  CHECK(m.load_state_dict(changed).ok());
  CHECK(m.fc.weight.dtype() == DType::f64);
  Tensor y = m(tensor<double>({1, 2, 3, 4, 5, 6}, {2, 3}));
  CHECK(y.dtype() == DType::f64);
}

// ---- safetensors ----

TEST_CASE("regressions: mutated safetensors files only ever throw kiln::Error", "[regr]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_regr_st_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string good = (dir / "good.safetensors").string();
  const std::string bad = (dir / "bad.safetensors").string();
  save({{"a", grid({2, 3}, 1)},
        {"b", tensor<int64_t>({1, 2, 3})},
        {"c", tensor<bool>({true, false})},
        {"d", zeros({0, 2}, DType::f16)}},
       good, {{"k", "v"}});
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::mt19937 rng(1234);
  const char interesting[] = "0123456789[]{}\",:-.eE \\u";
  int loaded = 0, rejected = 0;
  for (int it = 0; it < 400; ++it) {
    std::vector<char> m(bytes.begin(), bytes.end());
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % m.size();
      switch (rng() % 5) {
      case 0: m[pos] = static_cast<char>(rng() & 0xff); break;
      case 1: m[pos] = interesting[rng() % (sizeof interesting - 1)]; break;
      case 2:
        m.erase(m.begin() + static_cast<std::ptrdiff_t>(pos),
                m.begin() + static_cast<std::ptrdiff_t>(std::min(m.size(), pos + 1 + rng() % 8)));
        break;
      case 3:
        m.insert(m.begin() + static_cast<std::ptrdiff_t>(pos),
                 interesting[rng() % (sizeof interesting - 1)]);
        break;
      default: m.resize(pos); break;
      }
      if (m.empty()) m.push_back('x');
    }
    {
      std::ofstream out(bad, std::ios::binary | std::ios::trunc);
      out.write(m.data(), static_cast<std::streamsize>(m.size()));
    }
    try {
      auto t = load(bad);
      ++loaded;
      for (auto& [k, v] : t)
        (void)v.numel();
    } catch (const Error&) {
      ++rejected;
    }
  }
  CHECK(loaded + rejected == 400);
  CHECK(rejected > 0);
  fs::remove_all(dir);
}

TEST_CASE("regressions: large reductions on every path match an exact reference", "[regr]") {
  const int64_t n = 100003;
  std::vector<float> v = grid_values(3 * n, 41); // sums of these are exact in f32
  Tensor x = tensor<float>(v, {n, 3});
  double col[3] = {0, 0, 0};
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c)
      col[c] += v[static_cast<size_t>(i * 3 + c)];
  std::vector<float> want{static_cast<float>(col[0]), static_cast<float>(col[1]),
                          static_cast<float>(col[2])};
  const int saved = get_num_threads();
  for (int threads : {1, 2, 3}) {
    INFO("threads " << threads);
    set_num_threads(threads);
    CHECK(vals(sum(x, {0})) == want);                  // column path, parallel tree
    CHECK(vals(sum(x.t(), {1})) == want);              // row path, strided
    CHECK(vals(sum(x.t().contiguous(), {1})) == want); // row path, dense
    CHECK(vals(sum(x))[0] == static_cast<float>(col[0] + col[1] + col[2]));
    CHECK(vals(cumsum(x, 0).slice(0, n - 1, n)) == want);
    // argmax of a column with its maximum planted late.
    Tensor y = x.clone();
    y.slice(0, n - 5, n - 4).slice(1, 1, 2).fill_(Scalar(100.0f));
    CHECK(argmax(y, 0).to_vector<int64_t>()[1] == n - 5);
    CHECK(argmax(y.t(), 1).to_vector<int64_t>()[1] == n - 5);
    CHECK(argmax(y).item<int64_t>() == (n - 5) * 3 + 1);
  }
  set_num_threads(saved);
}

TEST_CASE("regressions: reduced-float matmul and conv agree between oneDNN and the loops",
          "[regr]") {
  for (DType dt : {DType::f16, DType::bf16, DType::f64}) {
    INFO("dtype " << dt);
    Tensor a = grid({3, 4, 5}, 51).to(dt).transpose(1, 2); // [3, 5, 4]
    Tensor b = grid({4, 6}, 52).to(dt).expand({3, 4, 6});
    Tensor ref, ref_c;
    Tensor x = grid({2, 4, 7, 6}, 53).to(dt).permute({0, 1, 3, 2}); // [2, 4, 6, 7]
    Tensor w = grid({4, 2, 2, 3}, 54).to(dt);
    {
      OnednnMode off(false);
      ref = matmul(a, b);
      ref_c = conv2d(x, w, {}, {2, 1}, {1, 0}, {2, 2}, 2);
    }
    check_same(matmul(a, b), ref);
    check_same(ref, matmul(a.to(DType::f64), b.to(DType::f64)).to(dt));
    check_same(conv2d(x, w, {}, {2, 1}, {1, 0}, {2, 2}, 2), ref_c);
    check_same(ref_c,
               conv2d(x.to(DType::f64), w.to(DType::f64), {}, {2, 1}, {1, 0}, {2, 2}, 2).to(dt));
  }
  // Integer matmul through the loop.
  Tensor ai = tensor<int32_t>({1, 2, 3, 4}, {2, 2});
  CHECK(matmul(ai, ai.t()).to_vector<int32_t>() == std::vector<int32_t>{5, 11, 11, 25});
}

TEST_CASE("regressions: pooling over non-contiguous input and integer dtypes", "[regr]") {
  Tensor x = grid({2, 5, 6, 3}, 61).permute({0, 3, 1, 2}); // [2, 3, 5, 6], channels last
  Tensor xc = x.contiguous();
  check_same(max_pool2d(x, {3, 2}, {2, 2}, {1, 1}, {1, 2}, true),
             max_pool2d(xc, {3, 2}, {2, 2}, {1, 1}, {1, 2}, true));
  check_same(avg_pool2d(x, {3, 2}, {2, 1}, {1, 0}, true, false),
             avg_pool2d(xc, {3, 2}, {2, 1}, {1, 0}, true, false));
  check_same(adaptive_avg_pool2d(x, {1}), mean(xc, {-2, -1}, true));
  Tensor xi = tensor<int64_t>({1, -5, 3, 7}, {1, 2, 2});
  CHECK(max_pool2d(xi, {2}).to_vector<int64_t>() == std::vector<int64_t>{7});
  Tensor xn = tensor<float>({1, kNaN, 3, 2}, {1, 1, 2, 2});
  CHECK(std::isnan(vals(max_pool2d(xn, {2}))[0]));
}

TEST_CASE("regressions: multi-dim reductions across leaves and tiles match a reference", "[regr]") {
  const Shape s{20, 7, 30};
  std::vector<float> v = grid_values(numel_of(s), 71);
  Tensor x = tensor<float>(v, s);
  // Reference sums over dims 0 and 2 (non-mergeable: dim 1 sits between).
  std::vector<float> want(7, 0.0f);
  std::vector<float> want_max(7, -kInf);
  for (int64_t i = 0; i < 20; ++i)
    for (int64_t j = 0; j < 7; ++j)
      for (int64_t k = 0; k < 30; ++k) {
        float e = v[static_cast<size_t>((i * 7 + j) * 30 + k)];
        want[static_cast<size_t>(j)] += e;
        want_max[static_cast<size_t>(j)] = std::max(want_max[static_cast<size_t>(j)], e);
      }
  CHECK(vals(sum(x, {0, 2})) == want);
  CHECK(vals(sum(x.permute({2, 1, 0}), {2, 0})) == want);
  CHECK(vals(sum(x.permute({1, 2, 0}), {1, 2}, true)) == want);
  CHECK(vals(amax(x.permute({0, 2, 1}), {0, 1})) == want_max);
  // argmax over a dense kept dim wider than one tile (the column scan).
  Tensor y = zeros({4, 600});
  y.slice(0, 2, 3).slice(1, 550, 551).fill_(Scalar(1.0f));
  y.slice(0, 3, 4).slice(1, 3, 4).fill_(Scalar(2.0f));
  auto am = argmax(y, 0).to_vector<int64_t>();
  CHECK(am[550] == 2);
  CHECK(am[3] == 3);
  CHECK(am[599] == 0);
  auto an = argmin(y.t().contiguous().t(), 0).to_vector<int64_t>();
  CHECK(an[550] == 0);
}

TEST_CASE("regressions: slice/narrow/expand with extreme arguments", "[regr]") {
  const int64_t big = std::numeric_limits<int64_t>::max();
  Tensor x = iota_f32(10);
  // Python: x[0:10:huge] is the first element; (end - start + step - 1) used to overflow.
  Tensor s = x.slice(0, 0, 10, big);
  CHECK(s.sizes() == Shape{1});
  CHECK(vals(s) == std::vector<float>{0});
  CHECK(vals(x.slice(0, 3, big, big - 1)) == std::vector<float>{3});
  Tensor m = iota_f32(12).view({3, 4});
  CHECK(vals(m.slice(1, 1, 4, big).contiguous()) == std::vector<float>{1, 5, 9});
  CHECK(vals(m.t().slice(1, 2, 3, big / 2)) == std::vector<float>{8, 9, 10, 11});
  CHECK(x.slice(0, -big, big).sizes() == Shape{10});
  CHECK(x.slice(0, 5, 2).sizes() == Shape{0});
  CHECK(vals(x.slice(0, 1, 10, 4)) == std::vector<float>{1, 5, 9});
  // start + length used to overflow past the bounds check.
  CHECK_THROWS_WITH(x.narrow(0, 1, big), Catch::Contains("narrow"));
  CHECK_THROWS_WITH(zeros({1, 1}).expand({big, big}), Catch::Contains("expand"));
  // chunk's ceil(n / chunks) used to overflow into a negative split size.
  std::vector<Tensor> parts = chunk(x, big);
  REQUIRE(parts.size() == 10);
  CHECK(vals(parts[9]) == std::vector<float>{9});
  CHECK(split(x, big).size() == 1);
}

TEST_CASE("regressions: data ops on 0-d and empty operands", "[regr]") {
  Tensor x = iota_f32(5);
  Tensor r = index_select(x, 0, scalar_tensor(Scalar(int64_t{2})));
  CHECK(r.sizes() == Shape{1});
  CHECK(vals(r) == std::vector<float>{2});
  Tensor s = scalar_tensor(7.0f);
  CHECK(index_select(s, 0, tensor<int64_t>({0})).sizes() == Shape{});
  CHECK_THROWS_WITH(index_select(s, 0, tensor<int64_t>({1})), Catch::Contains("out of range"));
  CHECK(vals(gather(s, 0, scalar_tensor(Scalar(int64_t{0})))) == std::vector<float>{7});
  CHECK(vals(scatter(s, 0, scalar_tensor(Scalar(int64_t{0})), scalar_tensor(3.0f))) ==
        std::vector<float>{3});
  CHECK(vals(pad(s, {})) == std::vector<float>{7});
  CHECK_THROWS_WITH(cat({s, s}), Catch::Contains("zero-dimensional"));
  CHECK(vals(stack({s, scalar_tensor(8.0f)})) == std::vector<float>{7, 8});
  Tensor e = zeros({0, 3});
  CHECK(index_select(e, 0, tensor<int64_t>(std::vector<int64_t>{}, {0})).sizes() == Shape{0, 3});
  CHECK_THROWS_WITH(index_select(e, 0, tensor<int64_t>({0})), Catch::Contains("out of range"));
  CHECK(index_select(zeros({2, 0}), 0, tensor<int64_t>({1, 1, 0})).sizes() == Shape{3, 0});
  CHECK(chunk(e, 3).size() == 3);
  CHECK(split(x, 2).size() == 3);
  CHECK(vals(split(x, 2)[2]) == std::vector<float>{4});
}

TEST_CASE("regressions: cross_entropy over strided logits, i32 targets and f16", "[regr]") {
  Tensor logits = grid({2, 2, 3}, 81).transpose(1, 2); // [N=2, C=3, d=2], non-contiguous
  Tensor target = tensor<int32_t>({0, 2, 1, 1}, {2, 2});
  Tensor ref = cross_entropy(logits.contiguous(), target.to(DType::i64), "none");
  check_same(cross_entropy(logits, target, "none"), ref);
  Tensor h = cross_entropy(logits.to(DType::f16), target, "sum");
  CHECK(h.dtype() == DType::f16);
  CHECK(vals(h)[0] == Approx(vals(sum(ref))[0]).epsilon(2e-3));
  CHECK_THROWS_WITH(cross_entropy(logits, tensor<int32_t>({0, -1, 1, 1}, {2, 2})),
                    Catch::Contains("out of bounds"));
}
