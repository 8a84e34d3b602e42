// Reductions: sum/mean/max/min/amax/amin/prod/var/std/argmax/argmin/cumsum/softmax against
// hand values, over strided inputs, empty and 0-d tensors, NaN, integer and f16 accumulation,
// the fixed summation order, and each user error.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include <kiln/kiln.h>

#include "runtime/tensor_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<int64_t> ivals(const Tensor& t) { return t.to_vector<int64_t>(); }

/// Deterministic values in [-1, 1) without depending on the random ops.
std::vector<float> wobbly(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = 12345;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1 << 23) - 1.0f;
  }
  return v;
}

} // namespace

TEST_CASE("sum: all dims, some dims, keepdim, negative dims", "[reduce]") {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor all = x.sum();
  CHECK(all.dim() == 0);
  CHECK(all.dtype() == DType::f32);
  CHECK(all.item<float>() == 21.0f);
  CHECK(vals(x.sum({0})) == std::vector<float>{5, 7, 9});
  CHECK(vals(x.sum({1})) == std::vector<float>{6, 15});
  CHECK(vals(x.sum({-1})) == std::vector<float>{6, 15});
  CHECK(std::signbit(tensor<float>({-0.0f, -0.0f}).sum().item<float>()));
  CHECK(x.sum({-1}, true).shape() == Shape{2, 1});
  CHECK(x.sum({0}, true).shape() == Shape{1, 3});
  CHECK(x.sum({}, true).shape() == Shape{1, 1});
  CHECK(x.sum({0, 1}).item<float>() == 21.0f);
  CHECK(x.sum({1, 0}, true).shape() == Shape{1, 1});
  CHECK_THROWS_WITH(x.sum({1, -1}), Catch::Contains("sum: dim -1 appears more than once"));
  CHECK_THROWS_WITH(x.sum({2}), Catch::Contains("sum: dim 2 is out of range"));
}

TEST_CASE("sum: transposed, step-sliced, permuted and expanded inputs", "[reduce]") {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(vals(x.t().sum({0})) == std::vector<float>{6, 15});
  CHECK(vals(x.t().sum({1})) == std::vector<float>{5, 7, 9});
  CHECK(iota_f32(10).slice(0, 0, 10, 3).sum().item<float>() == 18.0f);
  CHECK(tensor<float>({1, 2}).view({2, 1}).expand({2, 5}).sum({1}).to_vector<float>() ==
        std::vector<float>{5, 10});
  // [3, 4, 5] permuted, reduced over two non-adjacent dims, against a loop.
  Tensor a = iota_f32(60).view({3, 4, 5});
  Tensor p = a.permute({2, 0, 1}); // [5, 3, 4]
  std::vector<float> expect(3, 0.0f);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k)
        expect[static_cast<size_t>(i)] += static_cast<float>(20 * i + 5 * j + k);
  CHECK(vals(p.sum({0, 2})) == expect);
  CHECK(vals(a.sum({1, 2})) == expect);
  // Reduced dims that do not merge (a step slice) walk several dims.
  Tensor s = a.slice(2, 0, 5, 2); // k in {0, 2, 4}
  float total = 0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; k += 2)
        total += static_cast<float>(20 * i + 5 * j + k);
  CHECK(s.sum().item<float>() == total);
  CHECK(s.sum({0, 2}).shape() == Shape{4});
}

TEST_CASE("sum: accurate, and bit-identical across layouts and thread counts", "[reduce]") {
  const int64_t rows = 3000, cols = 37;
  std::vector<float> v = wobbly(rows * cols);
  Tensor x = tensor<float>(v, {rows, cols});
  std::vector<double> ref(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ref[static_cast<size_t>(c)] += v[static_cast<size_t>(r * cols + c)];
  std::vector<float> col = vals(x.sum({0}));
  for (int64_t c = 0; c < cols; ++c)
    CHECK(col[static_cast<size_t>(c)] == Approx(ref[static_cast<size_t>(c)]).margin(1e-4));
  // The column path (dense kept dim) and the row path (dense reduced dim) share one tree.
  CHECK(vals(x.t().contiguous().sum({1})) == col);
  CHECK(vals(x.t().sum({1})) == col);

  // 0.1 summed a million times: sequential f32 accumulation drifts by ~1000.
  std::vector<float> tenths(1000000, 0.1f);
  Tensor t = tensor<float>(tenths);
  CHECK(std::abs(t.sum().item<float>() - 100000.0f) < 2.0f);

  // The big reductions take the parallel paths; results must not depend on thread count.
  std::vector<float> w = wobbly(400000);
  Tensor big = tensor<float>(w, {2, 200000});
  int saved = get_num_threads();
  set_num_threads(1);
  std::vector<float> one_all = {big.sum().item<float>()};
  std::vector<float> one_rows = vals(big.sum({1}));
  std::vector<float> one_cols = vals(big.view({400, 1000}).sum({0}));
  set_num_threads(4);
  std::vector<float> four_all = {big.sum().item<float>()};
  std::vector<float> four_rows = vals(big.sum({1}));
  std::vector<float> four_cols = vals(big.view({400, 1000}).sum({0}));
  set_num_threads(saved);
  CHECK(one_all == four_all);
  CHECK(one_rows == four_rows);
  CHECK(one_cols == four_cols);
  double ref_all = 0;
  for (float f : w)
    ref_all += f;
  CHECK(four_all[0] == Approx(ref_all).margin(1e-2));
}

TEST_CASE("sum/prod: integers and bool accumulate in i64, dtype overrides", "[reduce]") {
  Tensor i8 = tensor<int8_t>({100, 100, 100});
  Tensor s = i8.sum();
  CHECK(s.dtype() == DType::i64);
  CHECK(s.item<int64_t>() == 300);
  CHECK(sum(i8, {}, false, DType::i8).item<int8_t>() == static_cast<int8_t>(44)); // wraps
  CHECK(sum(i8, {}, false, DType::f32).item<float>() == 300.0f);
  Tensor b = tensor<bool>({true, false, true, true});
  CHECK(b.sum().dtype() == DType::i64);
  CHECK(b.sum().item<int64_t>() == 3);
  Tensor u = tensor<uint8_t>({200, 100}, {1, 2});
  CHECK(ivals(u.sum({1})) == std::vector<int64_t>{300});
  Tensor i32 = tensor<int32_t>({2, 3, 4, 5}, {2, 2});
  CHECK(i32.prod().dtype() == DType::i64);
  CHECK(i32.prod().item<int64_t>() == 120);
  CHECK(ivals(i32.prod({0})) == std::vector<int64_t>{8, 15});
  CHECK(ivals(i32.t().sum({1})) == std::vector<int64_t>{6, 8});
  // i64 wraps like two's complement.
  Tensor big = tensor<int64_t>({std::numeric_limits<int64_t>::max(), 1});
  CHECK(big.sum().item<int64_t>() == std::numeric_limits<int64_t>::min());
  // float → int dtype casts first (truncating), as PyTorch.
  CHECK(sum(tensor<float>({1.5f, 1.5f}), {}, false, DType::i64).item<int64_t>() == 2);
}

TEST_CASE("sum/prod: f16 and bf16 accumulate in f32", "[reduce]") {
  Tensor h = tensor<float>(std::vector<float>(4096, 1.0f)).to(DType::f16);
  Tensor s = h.sum();
  CHECK(s.dtype() == DType::f16);
  CHECK(static_cast<float>(s.item<Half>()) == 4096.0f); // f16 accumulation stalls at 2048
  Tensor bf = tensor<float>(std::vector<float>(1024, 1.0f)).to(DType::bf16);
  CHECK(static_cast<float>(bf.sum().item<BFloat16>()) == 1024.0f); // bf16 stalls at 256
  CHECK(sum(h, {}, false, DType::f32).item<float>() == 4096.0f);
  Tensor p = tensor<float>({2, 3, 0.5f}).to(DType::f16);
  CHECK(static_cast<float>(p.prod().item<Half>()) == 3.0f);
  CHECK(h.view({64, 64}).sum({0}).dtype() == DType::f16);
  CHECK(static_cast<float>(h.view({64, 64}).sum({0}).to_vector<Half>()[5]) == 64.0f);
}

TEST_CASE("reductions of empty and 0-d tensors", "[reduce]") {
  Tensor e = iota_f32(0);
  CHECK(e.sum().item<float>() == 0.0f);
  CHECK_FALSE(std::signbit(e.sum().item<float>()));
  CHECK(e.prod().item<float>() == 1.0f);
  CHECK(std::isnan(e.mean().item<float>()));
  Tensor z = iota_f32(0).view({2, 0});
  CHECK(vals(z.sum({1})) == std::vector<float>{0, 0});
  CHECK(vals(z.prod({1})) == std::vector<float>{1, 1});
  CHECK(z.sum({0}).shape() == Shape{0});
  CHECK(amax(z, {0}).shape() == Shape{0});
  CHECK(tensor<int32_t>(std::vector<int32_t>{}).sum().item<int64_t>() == 0);
  CHECK_THROWS_WITH(e.max(), Catch::Contains("max: cannot reduce over an empty dimension"));
  CHECK_THROWS_WITH(z.min({1}), Catch::Contains("min: cannot reduce over an empty dimension"));
  CHECK_THROWS_WITH(
      amax(z, {1}),
      Catch::Contains("amax: cannot reduce over an empty dimension (dim 1 of shape [2, 0])"));
  CHECK_THROWS_WITH(amin(e), Catch::Contains("amin: cannot reduce over an empty dimension"));
  CHECK_THROWS_WITH(e.argmax(), Catch::Contains("argmax: cannot reduce over an empty tensor"));
  CHECK_THROWS_WITH(z.argmin(1), Catch::Contains("argmin: cannot reduce over an empty dimension"));

  Tensor s = tensor<float>({3.5f}).view({});
  CHECK(s.sum().dim() == 0);
  CHECK(s.sum().item<float>() == 3.5f);
  CHECK(s.sum({0}).item<float>() == 3.5f);
  CHECK(s.sum({-1}, true).dim() == 0);
  CHECK(s.max().item<float>() == 3.5f);
  CHECK(s.mean().item<float>() == 3.5f);
  CHECK(s.argmax().item<int64_t>() == 0);
  CHECK(s.argmax(0).dim() == 0);
  CHECK(s.cumsum(0).item<float>() == 3.5f);
  CHECK(s.prod({0}).item<float>() == 3.5f);
}

TEST_CASE("max/min/amax/amin: values, NaN propagation, integer and bool dtypes", "[reduce]") {
  Tensor x = tensor<float>({1, 7, -2, 4, 0, 9}, {2, 3});
  CHECK(x.max().item<float>() == 9.0f);
  CHECK(x.min().item<float>() == -2.0f);
  CHECK(vals(x.max({1})) == std::vector<float>{7, 9});
  CHECK(vals(x.min({0})) == std::vector<float>{1, 0, -2});
  CHECK(vals(x.t().max({0})) == std::vector<float>{7, 9});
  CHECK(amax(x, {0}, true).shape() == Shape{1, 3});
  Tensor n = tensor<float>({1, kNaN, 2, 5, 3, 4}, {2, 3});
  CHECK(std::isnan(n.max().item<float>()));
  CHECK(std::isnan(n.min().item<float>()));
  std::vector<float> m = vals(n.max({1}));
  CHECK(std::isnan(m[0]));
  CHECK(m[1] == 5.0f);
  std::vector<float> c = vals(n.min({0}));
  CHECK(c[0] == 1.0f);
  CHECK(std::isnan(c[1]));
  CHECK(c[2] == 2.0f);
  CHECK(tensor<float>({-kInf, -kInf}).max().item<float>() == -kInf);
  CHECK(tensor<float>({kInf, 1}).min().item<float>() == 1.0f);
  Tensor i = tensor<int32_t>({-5, 3, 2});
  CHECK(i.max().dtype() == DType::i32);
  CHECK(i.max().item<int32_t>() == 3);
  CHECK(i.min().item<int32_t>() == -5);
  CHECK(tensor<uint8_t>({200, 7}).min().item<uint8_t>() == 7);
  CHECK(tensor<bool>({false, true}).max().item<bool>());
  CHECK_FALSE(tensor<bool>({false, true}).min().item<bool>());
  Tensor h = tensor<float>({1, 8, -3}).to(DType::bf16);
  CHECK(static_cast<float>(h.max().item<BFloat16>()) == 8.0f);
}

TEST_CASE("prod: values over dims", "[reduce]") {
  Tensor x = tensor<float>({1, 2, 3, 4}, {2, 2});
  CHECK(vals(x.prod({0})) == std::vector<float>{3, 8});
  CHECK(vals(x.prod({1}, true)) == std::vector<float>{2, 12});
  CHECK(x.prod().item<float>() == 24.0f);
  CHECK(std::isnan(tensor<float>({2, kNaN}).prod().item<float>()));
}

TEST_CASE("mean, var, std: values, correction, errors", "[reduce]") {
  Tensor x = tensor<float>({1, 2, 3, 4}, {1, 4});
  CHECK(x.mean().item<float>() == 2.5f);
  CHECK(vals(x.mean({1})) == std::vector<float>{2.5f});
  CHECK(x.mean({0}, true).shape() == Shape{1, 4});
  CHECK(x.var().item<float>() == Approx(5.0 / 3.0));
  CHECK(x.var({}, false, 0).item<float>() == Approx(1.25));
  CHECK(x.std().item<float>() == Approx(std::sqrt(5.0 / 3.0)));
  CHECK(x.var({1}, true).shape() == Shape{1, 1});
  Tensor m = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(vals(m.var({0})) == std::vector<float>{4.5f, 4.5f, 4.5f});
  CHECK(vals(m.t().var({1})) == std::vector<float>{4.5f, 4.5f, 4.5f});
  CHECK(vals(m.mean({-1})) == std::vector<float>{2, 5});
  // Two-pass: a large offset does not destroy the variance.
  Tensor off = tensor<float>({10000.0f, 10001.0f, 10002.0f});
  CHECK(off.var().item<float>() == Approx(1.0));
  // n - correction <= 0: 0/0 = NaN, x/0 = inf (PyTorch).
  CHECK(std::isnan(tensor<float>({3.0f}).var().item<float>()));
  CHECK(std::isinf(tensor<float>({1.0f, 3.0f}).var({}, false, 2).item<float>()));
  CHECK(std::isnan(iota_f32(0).var().item<float>()));
  Tensor h = tensor<float>({1, 2, 3, 4}).to(DType::f16);
  CHECK(h.mean().dtype() == DType::f16);
  CHECK(static_cast<float>(h.mean().item<Half>()) == 2.5f);
  CHECK(static_cast<float>(h.var().item<Half>()) == Approx(5.0 / 3.0).epsilon(1e-3));
  CHECK_THROWS_WITH(tensor<int64_t>({1, 2}).mean(),
                    Catch::Contains("mean: expected a floating-point input, got i64"));
  CHECK_THROWS_WITH(tensor<int32_t>({1, 2}).var(),
                    Catch::Contains("var: expected a floating-point input"));
  CHECK_THROWS_WITH(tensor<bool>({true}).std(),
                    Catch::Contains("std: expected a floating-point input"));
  CHECK_THROWS_WITH(x.mean({0, 0}), Catch::Contains("mean: dim 0 appears more than once"));
}

TEST_CASE("argmax/argmin: first extremum, NaN wins, flattened without dim", "[reduce]") {
  Tensor x = tensor<float>({1, 5, 7, 2}, {2, 2});
  CHECK(x.argmax().item<int64_t>() == 2);
  CHECK(x.argmax().dtype() == DType::i64);
  CHECK(x.argmax().dim() == 0);
  CHECK(x.argmax(std::nullopt, true).shape() == Shape{1, 1});
  CHECK(ivals(x.argmax(1)) == std::vector<int64_t>{1, 0});
  CHECK(ivals(x.argmin(0, true)) == std::vector<int64_t>{0, 1});
  CHECK(x.argmin(0, true).shape() == Shape{1, 2});
  CHECK(ivals(x.t().argmax(1)) == std::vector<int64_t>{1, 0});
  CHECK(ivals(x.t().argmax(-1)) == std::vector<int64_t>{1, 0});
  CHECK(x.t().argmin().item<int64_t>() == 0);
  CHECK(tensor<float>({3, 1, 1, 3}).argmin().item<int64_t>() == 1);
  CHECK(tensor<float>({3, 1, 1, 3}).argmax().item<int64_t>() == 0);
  CHECK(tensor<float>({1, kNaN, 5, kNaN}).argmax().item<int64_t>() == 1);
  CHECK(tensor<float>({1, kNaN, -5, kNaN}).argmin().item<int64_t>() == 1);
  CHECK(tensor<float>({-kInf, -kInf}).argmax().item<int64_t>() == 0);
  CHECK(tensor<int32_t>({4, 9, 9}).argmax().item<int64_t>() == 1);
  CHECK(tensor<bool>({false, true}).argmax().item<int64_t>() == 1);
  CHECK(iota_f32(12).view({3, 4}).slice(1, 0, 4, 2).argmax(0).to_vector<int64_t>() ==
        std::vector<int64_t>{2, 2});
  CHECK_THROWS_WITH(x.argmax(2), Catch::Contains("argmax: dim 2 is out of range"));
}

TEST_CASE("cumsum: along each dim, strided input, dtype rule", "[reduce]") {
  CHECK(vals(tensor<float>({1, 2, 3, 4}).cumsum(0)) == std::vector<float>{1, 3, 6, 10});
  Tensor m = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(vals(m.cumsum(0)) == std::vector<float>{1, 2, 3, 5, 7, 9});
  CHECK(vals(m.cumsum(1)) == std::vector<float>{1, 3, 6, 4, 9, 15});
  CHECK(vals(m.cumsum(-1)) == vals(m.cumsum(1)));
  CHECK(vals(m.t().cumsum(0)) == std::vector<float>{1, 4, 3, 9, 6, 15});
  CHECK(m.cumsum(0).shape() == Shape{2, 3});
  Tensor i8 = tensor<int8_t>({100, 100, 100});
  Tensor c = i8.cumsum(0);
  CHECK(c.dtype() == DType::i64);
  CHECK(ivals(c) == std::vector<int64_t>{100, 200, 300});
  CHECK(ivals(tensor<bool>({true, false, true}).cumsum(0)) == std::vector<int64_t>{1, 1, 2});
  CHECK(cumsum(i8, 0, DType::f32).dtype() == DType::f32);
  Tensor h = tensor<float>(std::vector<float>(3000, 1.0f)).to(DType::f16).cumsum(0);
  CHECK(h.dtype() == DType::f16);
  CHECK(static_cast<float>(h.to_vector<Half>()[2999]) == 3000.0f); // accumulated in f32
  CHECK(iota_f32(0).view({0, 3}).cumsum(1).shape() == Shape{0, 3});
  std::vector<float> nan_scan = vals(tensor<float>({1, kNaN, 2}).cumsum(0));
  CHECK(nan_scan[0] == 1.0f);
  CHECK(std::isnan(nan_scan[2]));
  // -0.0 + -0.0 is -0.0 (IEEE; NumPy agrees): the scan keeps the sign.
  std::vector<float> nz = vals(tensor<float>({-0.0f, -0.0f, 1.0f}).cumsum(0));
  CHECK(std::signbit(nz[0]));
  CHECK(std::signbit(nz[1]));
  CHECK_FALSE(std::signbit(nz[2]));
  CHECK(vals(m.t().cumsum(1)) == std::vector<float>{1, 5, 2, 7, 3, 9});
  CHECK_THROWS_WITH(m.cumsum(2), Catch::Contains("cumsum: dim 2 is out of range"));
}

TEST_CASE("softmax and log_softmax: values, stability, dims, dtypes", "[reduce]") {
  Tensor x = tensor<float>({1, 2, 3});
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  std::vector<float> s = vals(x.softmax(0));
  CHECK(s[0] == Approx(std::exp(1.0) / z));
  CHECK(s[2] == Approx(std::exp(3.0) / z));
  std::vector<float> ls = vals(x.log_softmax(0));
  CHECK(ls[1] == Approx(2.0 - std::log(z)));
  // Stable for large logits.
  std::vector<float> big = vals(tensor<float>({1000, 1001}).softmax(-1));
  CHECK(big[0] == Approx(0.2689414));
  CHECK(big[1] == Approx(0.7310586));
  std::vector<float> lbig = vals(tensor<float>({1000, 1001}).log_softmax(0));
  CHECK(lbig[0] == Approx(-1.3132617));
  CHECK(std::isfinite(lbig[1]));
  Tensor m = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  std::vector<float> col = vals(m.softmax(0));
  CHECK(col[0] + col[3] == Approx(1.0));
  CHECK(col[0] == Approx(1.0 / (1.0 + std::exp(3.0))));
  std::vector<float> by_row = vals(m.t().softmax(1)), by_col = vals(m.softmax(0).t());
  for (size_t i = 0; i < by_row.size(); ++i)
    CHECK(by_row[i] == Approx(by_col[i]));
  std::vector<float> masked = vals(tensor<float>({-kInf, 0, 0}).softmax(0));
  CHECK(masked[0] == 0.0f);
  CHECK(masked[1] == Approx(0.5));
  Tensor h = tensor<float>({1, 2, 3}).to(DType::f16).softmax(0);
  CHECK(h.dtype() == DType::f16);
  CHECK(static_cast<float>(h.to_vector<Half>()[2]) == Approx(std::exp(3.0) / z).epsilon(1e-3));
  CHECK(iota_f32(0).view({0, 3}).softmax(1).shape() == Shape{0, 3});
  CHECK(iota_f32(0).view({3, 0}).log_softmax(1).shape() == Shape{3, 0});
  CHECK(tensor<float>({2.0f}).view({}).softmax(0).item<float>() == 1.0f);
  CHECK_THROWS_WITH(tensor<int64_t>({1, 2}).softmax(0),
                    Catch::Contains("softmax: expected a floating-point input"));
  CHECK_THROWS_WITH(x.log_softmax(1), Catch::Contains("log_softmax: dim 1 is out of range"));
}

TEST_CASE("sum/amax/argmax over every dim subset of permuted and sliced inputs", "[reduce]") {
  // Integer-valued floats sum exactly in any order, so results compare exactly with a loop
  // over the logical (row-major) values.
  std::vector<float> base(4 * 5 * 6 * 7);
  for (size_t i = 0; i < base.size(); ++i)
    base[i] = static_cast<float>((i * 37) % 23) - 11.0f;
  Tensor t = tensor<float>(base, {4, 5, 6, 7});
  std::vector<Tensor> inputs = {
      t, t.permute({2, 0, 3, 1}), t.slice(3, 1, 7, 2).permute({3, 1, 0, 2}),
      t.slice(0, 1, 4).transpose(1, 3), t.slice(1, 0, 1).expand({4, 3, 6, 7})};
  for (const Tensor& x : inputs) {
    const Shape sz = x.sizes();
    std::vector<float> v = vals(x);
    for (int mask = 1; mask < 16; ++mask) {
      std::vector<int64_t> dims;
      for (int64_t d = 0; d < 4; ++d)
        if (mask & (1 << d)) dims.push_back(d);
      Shape out_shape;
      for (int64_t d = 0; d < 4; ++d)
        out_shape.push_back(mask & (1 << d) ? 1 : sz[d]);
      std::vector<float> want_sum(static_cast<size_t>(numel_of(out_shape)), 0.0f);
      std::vector<float> want_max(want_sum.size(), -1e30f);
      size_t k = 0;
      for (int64_t a = 0; a < sz[0]; ++a)
        for (int64_t b = 0; b < sz[1]; ++b)
          for (int64_t c = 0; c < sz[2]; ++c)
            for (int64_t d = 0; d < sz[3]; ++d, ++k) {
              int64_t idx[4] = {a, b, c, d};
              int64_t o = 0;
              for (int64_t e = 0; e < 4; ++e)
                o = o * out_shape[e] + (mask & (1 << e) ? 0 : idx[e]);
              want_sum[static_cast<size_t>(o)] += v[k];
              want_max[static_cast<size_t>(o)] = std::max(want_max[static_cast<size_t>(o)], v[k]);
            }
      CAPTURE(sz, dims);
      Tensor s = x.sum(dims, true);
      REQUIRE(s.shape() == out_shape);
      CHECK(vals(s) == want_sum);
      CHECK(vals(amax(x, dims, true)) == want_max);
    }
    for (int64_t d = 0; d < 4; ++d) {
      // argmax along d against a loop: first index of the maximum.
      Tensor am = x.argmax(d);
      std::vector<int64_t> got = ivals(am.reshape({-1}));
      Tensor moved = x.transpose(d, 3).contiguous(); // the reduced dim last
      std::vector<float> mv = vals(moved);
      const int64_t n = sz[d];
      std::vector<int64_t> want;
      for (size_t r = 0; r < mv.size(); r += static_cast<size_t>(n)) {
        int64_t best = 0;
        for (int64_t i = 1; i < n; ++i)
          if (mv[r + static_cast<size_t>(i)] > mv[r + static_cast<size_t>(best)]) best = i;
        want.push_back(best);
      }
      // `moved` orders outputs with dims d and 3 swapped; compare via the same transpose.
      Shape kept = moved.sizes();
      kept.pop_back();
      Tensor want_t = tensor<int64_t>(want, kept);
      if (d != 3) want_t = want_t.unsqueeze(-1).transpose(d, 3).squeeze(d);
      CAPTURE(sz, d);
      CHECK(got == ivals(want_t.reshape({-1})));
    }
  }
}
