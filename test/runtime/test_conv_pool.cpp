// conv2d against a naive loop (both the oneDNN and the loop path), and the pools against
// hand-computed windows: padding, ceil_mode, count_include_pad, NaN, dilation, errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <kiln/kiln.h>

#include "runtime/kernels/onednn.h"
#include "runtime/tensor_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct ConvArgs {
  std::vector<int64_t> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
};

/// Naive NCHW conv in double.
std::vector<double> naive_conv(const Tensor& tx, const Tensor& tw, const Tensor& tb,
                               const ConvArgs& a, Shape& out_shape) {
  const std::vector<double> x = tx.to_vector<double>(), w = tw.to_vector<double>();
  const std::vector<double> b = tb.defined() ? tb.to_vector<double>() : std::vector<double>();
  const int64_t n = tx.size(0), c = tx.size(1), h = tx.size(2), wd = tx.size(3);
  const int64_t o = tw.size(0), cg = tw.size(1), kh = tw.size(2), kw = tw.size(3);
  const int64_t oh = (h + 2 * a.padding[0] - a.dilation[0] * (kh - 1) - 1) / a.stride[0] + 1;
  const int64_t ow = (wd + 2 * a.padding[1] - a.dilation[1] * (kw - 1) - 1) / a.stride[1] + 1;
  out_shape = {n, o, oh, ow};
  std::vector<double> out(static_cast<size_t>(n * o * oh * ow));
  const int64_t og = o / a.groups;
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double s = b.empty() ? 0.0 : b[oc];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = y * a.stride[0] - a.padding[0] + ky * a.dilation[0];
                const int64_t ix = xo * a.stride[1] - a.padding[1] + kx * a.dilation[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                const int64_t cin = (oc / og) * cg + ci;
                s += x[((ni * c + cin) * h + iy) * wd + ix] *
                     w[((oc * cg + ci) * kh + ky) * kw + kx];
              }
          out[((ni * o + oc) * oh + y) * ow + xo] = s;
        }
  return out;
}

void check_conv(const Tensor& x, const Tensor& w, const Tensor& b, const ConvArgs& a,
                double tol = 1e-6) {
  Shape shape;
  std::vector<double> expected = naive_conv(x, w, b, a, shape);
  Tensor y = conv2d(x, w, b, a.stride, a.padding, a.dilation, a.groups);
  REQUIRE(y.sizes() == shape);
  CHECK(y.dtype() == x.dtype());
  std::vector<double> got = y.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::abs(got[i] - expected[i]) <= tol * (1.0 + std::abs(expected[i])));
  }
}

Tensor arange_image(int64_t h, int64_t w) {
  return reshape(arange(Scalar(int64_t{0}), Scalar(h * w), Scalar(int64_t{1}), DType::f32),
                 {1, 1, h, w});
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

} // namespace

// ---- conv2d ----

TEST_CASE("conv2d hand-computed values", "[conv]") {
  const bool use_onednn = GENERATE(true, false);
  OnednnMode mode(use_onednn);
  Tensor x = reshape(tensor<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}), {1, 1, 3, 3});
  Tensor w = reshape(tensor<float>({1, 0, 0, 1}), {1, 1, 2, 2});
  CHECK(values(conv2d(x, w)) == std::vector<float>{6, 8, 12, 14});
  CHECK(values(conv2d(x, w, tensor<float>({10}))) == std::vector<float>{16, 18, 22, 24});
  // Padding 1 with a 1x1 kernel of 2: a zero border around 2x.
  Tensor y = conv2d(x, full({1, 1, 1, 1}, 2.0f), {}, {1, 1}, {1, 1});
  CHECK(y.sizes() == Shape{1, 1, 5, 5});
  CHECK(values(y)[0] == 0.0f);
  CHECK(values(y)[6] == 2.0f);
  CHECK(values(y)[18] == 18.0f);
}

TEST_CASE("conv2d matches the naive loop: stride, padding, dilation, groups, bias", "[conv]") {
  const bool use_onednn = GENERATE(true, false);
  OnednnMode mode(use_onednn);
  Tensor x = grid({2, 4, 7, 6}, 1);
  check_conv(x, grid({3, 4, 3, 3}, 2), {}, {});
  check_conv(x, grid({3, 4, 3, 3}, 3), grid({3}, 4), {{2, 2}, {1, 1}, {1, 1}, 1});
  check_conv(x, grid({5, 4, 2, 3}, 5), grid({5}, 6), {{1, 2}, {0, 1}, {1, 1}, 1});
  check_conv(x, grid({2, 4, 3, 2}, 7), {}, {{1, 1}, {2, 1}, {2, 3}, 1});
  check_conv(x, grid({6, 2, 3, 3}, 8), grid({6}, 9), {{1, 1}, {1, 1}, {1, 1}, 2});
  check_conv(x, grid({4, 1, 3, 3}, 10), grid({4}, 11), {{2, 1}, {1, 0}, {2, 1}, 4}); // depthwise
  check_conv(x, grid({8, 1, 1, 1}, 12), {}, {{3, 3}, {0, 0}, {1, 1}, 4}); // 1x1, 2 outputs/group
  // Kernel exactly as large as the padded input.
  check_conv(grid({1, 1, 3, 3}, 13), grid({1, 1, 5, 5}, 14), {}, {{1, 1}, {1, 1}, {1, 1}, 1});
  // f64 runs the loop; integer-valued grid sums are exact either way.
  check_conv(to(x, DType::f64), to(grid({4, 2, 3, 3}, 15), DType::f64),
             to(grid({4}, 16), DType::f64), {{2, 1}, {1, 1}, {1, 2}, 2});
}

TEST_CASE("conv2d reads transposed and sliced operands", "[conv]") {
  const bool use_onednn = GENERATE(true, false);
  OnednnMode mode(use_onednn);
  // NHWC storage seen as NCHW, an HWIO weight seen as OIHW, a strided bias.
  Tensor x = permute(grid({2, 6, 5, 3}, 21), {0, 3, 1, 2});
  Tensor w = permute(grid({3, 3, 3, 4}, 22), {3, 2, 0, 1});
  Tensor b = grid({8}, 23).slice(0, 0, 8, 2);
  REQUIRE_FALSE(x.is_contiguous());
  check_conv(x, w, b, {{1, 1}, {1, 1}, {1, 1}, 1});
  // A sliced input with a storage offset.
  Tensor xs = grid({3, 3, 9, 9}, 24).slice(0, 1, 3).slice(2, 1, 9, 2);
  check_conv(xs, grid({2, 3, 2, 2}, 25), {}, {{1, 1}, {0, 0}, {1, 1}, 1});
}

TEST_CASE("conv2d on bf16 and f16 accumulates in f32", "[conv]") {
  const bool use_onednn = GENERATE(true, false);
  OnednnMode mode(use_onednn);
  Tensor x = grid({1, 3, 5, 5}, 31), w = grid({2, 3, 3, 3}, 32), b = grid({2}, 33);
  Tensor ref = conv2d(x, w, b, {1, 1}, {1, 1});
  for (DType t : {DType::bf16, DType::f16}) {
    Tensor y = conv2d(to(x, t), to(w, t), to(b, t), {1, 1}, {1, 1});
    CHECK(y.dtype() == t);
    CHECK(values(y) == values(to(ref, t))); // exact sums, one rounding
  }
}

TEST_CASE("conv2d: unbatched input, empty batch, no input channels", "[conv]") {
  Tensor x = grid({2, 5, 5}, 41), w = grid({3, 2, 3, 3}, 42);
  Tensor y = conv2d(x, w);
  CHECK(y.sizes() == Shape{3, 3, 3});
  CHECK(values(y) == values(conv2d(unsqueeze(x, 0), w).reshape({3, 3, 3})));
  CHECK(conv2d(zeros({0, 2, 5, 5}), w).sizes() == Shape{0, 3, 3, 3});
  // No input channels: the sum is empty and only the bias remains.
  Tensor bias_only = conv2d(zeros({1, 0, 3, 3}), zeros({2, 0, 1, 1}), tensor<float>({1, 2}));
  CHECK(values(bias_only) ==
        std::vector<float>{1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2});
}

TEST_CASE("conv2d on larger inputs agrees between oneDNN and the loops", "[conv]") {
  Tensor x = rand({2, 8, 17, 15}), w = rand({12, 4, 3, 3}), b = rand({12});
  Tensor loop;
  {
    OnednnMode mode(false);
    loop = conv2d(x, w, b, {2, 1}, {1, 1}, {1, 2}, 2);
  }
  Tensor lib = conv2d(x, w, b, {2, 1}, {1, 1}, {1, 2}, 2);
  std::vector<float> p = values(loop), q = values(lib);
  REQUIRE(p.size() == q.size());
  for (size_t i = 0; i < p.size(); ++i)
    REQUIRE(std::abs(p[i] - q[i]) <= 1e-4f * (1.0f + std::abs(p[i])));
  Shape s;
  std::vector<double> ref = naive_conv(x, w, b, {{2, 1}, {1, 1}, {1, 2}, 2}, s);
  for (size_t i = 0; i < p.size(); ++i)
    REQUIRE(std::abs(p[i] - ref[i]) <= 1e-4 * (1.0 + std::abs(ref[i])));
}

TEST_CASE("conv2d errors", "[conv]") {
  Tensor x = zeros({1, 4, 5, 5}), w = zeros({2, 4, 3, 3});
  CHECK_THROWS_WITH(conv2d(zeros({4, 5}), w),
                    Catch::Contains("conv2d: expected a 3-d (unbatched) or 4-d input, got [4, 5]"));
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 4, 3})),
                    Catch::Contains("conv2d: expected a 4-d weight (out_channels, "
                                    "in_channels/groups, kH, kW), got [2, 4, 3]"));
  CHECK_THROWS_WITH(
      conv2d(x, zeros({2, 3, 3, 3})),
      Catch::Contains("conv2d: weight [2, 3, 3, 3] with groups = 1 expects input with 3 channels "
                      "(in_channels/groups = 3), but input [1, 4, 5, 5] has 4"));
  CHECK_THROWS_WITH(conv2d(x, zeros({3, 2, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 2),
                    Catch::Contains("conv2d: out_channels (3) must be divisible by groups (2)"));
  CHECK_THROWS_WITH(
      conv2d(x, w, zeros({3})),
      Catch::Contains("conv2d: bias must be 1-d with 2 elements (out_channels), got [3]"));
  CHECK_THROWS_WITH(
      conv2d(x, zeros({2, 4, 6, 6})),
      Catch::Contains("conv2d: kernel size (6, 6) (dilated extent 6) can't be greater than the "
                      "padded input size (5, 5)"));
  CHECK_THROWS_WITH(
      conv2d(x, w, {}, {1, 1}, {0, 0}, {3, 3}),
      Catch::Contains("(dilated extent 7) can't be greater than the padded input size (5, 5)"));
  CHECK_THROWS_WITH(conv2d(x, w, {}, {0, 1}),
                    Catch::Contains("conv2d: stride must be positive, got (0, 1)"));
  CHECK_THROWS_WITH(conv2d(x, w, {}, {1, 1}, {-1, 0}),
                    Catch::Contains("conv2d: padding must be non-negative, got (-1, 0)"));
  CHECK_THROWS_WITH(conv2d(x, w, {}, {1, 1}, {0, 0}, {0, 1}),
                    Catch::Contains("conv2d: dilation must be positive, got (0, 1)"));
  CHECK_THROWS_WITH(conv2d(x, w, {}, {1, 1, 1}),
                    Catch::Contains("conv2d: stride must be one int or a pair, got 3 values"));
  CHECK_THROWS_WITH(conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 1}, 0),
                    Catch::Contains("conv2d: groups must be positive, got 0"));
  CHECK_THROWS_WITH(
      conv2d(x, zeros({2, 4, 3, 3}, DType::f64)),
      Catch::Contains("conv2d: input and weight must have the same dtype, got f32 and f64"));
  CHECK_THROWS_WITH(
      conv2d(x, w, zeros({2}, DType::f64)),
      Catch::Contains("conv2d: input and bias must have the same dtype, got f32 and f64"));
  CHECK_THROWS_WITH(conv2d(zeros({1, 4, 5, 5}, DType::i64), zeros({2, 4, 3, 3}, DType::i64)),
                    Catch::Contains("conv2d: expected a floating input, got i64"));
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 4, 0, 3})),
                    Catch::Contains("conv2d: weight [2, 4, 0, 3] has an empty kernel"));
}

// ---- max_pool2d ----

TEST_CASE("max_pool2d hand values, stride default and padding", "[pool]") {
  Tensor x = arange_image(4, 4); // 0..15
  Tensor y = max_pool2d(x, {2});
  CHECK(y.sizes() == Shape{1, 1, 2, 2});
  CHECK(values(y) == std::vector<float>{5, 7, 13, 15});
  CHECK(values(max_pool2d(x, {3}, {1})) == std::vector<float>{10, 11, 14, 15});
  CHECK(values(max_pool2d(x, {2, 2}, {2, 2}, {1, 1})) ==
        std::vector<float>{0, 2, 3, 8, 10, 11, 12, 14, 15});
  // Padding is -inf: an all-negative input keeps its own maxima.
  Tensor neg_x = sub(x, 100.0);
  CHECK(values(max_pool2d(neg_x, {2}, {2}, {1})) ==
        std::vector<float>{-100, -98, -97, -92, -90, -89, -88, -86, -85});
  // Rectangular kernel and stride, and dilation 2 (taps 0 and 2).
  CHECK(values(max_pool2d(x, {1, 2}, {2, 1})) == std::vector<float>{1, 2, 3, 9, 10, 11});
  CHECK(values(max_pool2d(x, {2, 2}, {1, 1}, {0, 0}, {2, 2})) ==
        std::vector<float>{10, 11, 14, 15});
}

TEST_CASE("max_pool2d ceil_mode keeps windows that start inside the input", "[pool]") {
  Tensor x = arange_image(5, 5);
  CHECK(max_pool2d(x, {2}).sizes() == Shape{1, 1, 2, 2});
  Tensor y = max_pool2d(x, {2}, {2}, {0}, {1}, true);
  CHECK(y.sizes() == Shape{1, 1, 3, 3});
  CHECK(values(y) == std::vector<float>{6, 8, 9, 16, 18, 19, 21, 23, 24});
  // A window that would start in the right padding is dropped: 6 + 2 - 2 = 6, ceil(6/4) + 1 = 3,
  // but window 2 starts at 8 - 1 = 7 >= 6, so 2 windows remain.
  CHECK(max_pool2d(arange_image(6, 6), {2}, {4}, {1}, {1}, true).sizes() == Shape{1, 1, 2, 2});
}

TEST_CASE("max_pool2d propagates NaN and handles dtypes and layouts", "[pool]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = reshape(tensor<float>({1, nan, 3, 4, nan, 0, -1, 7}), {1, 2, 2, 2});
  std::vector<float> y = values(max_pool2d(x, {2}));
  CHECK(std::isnan(y[0])); // NaN after a smaller value
  CHECK(std::isnan(y[1])); // NaN first, larger values after
  Tensor inf = reshape(tensor<float>({-INFINITY, -INFINITY, -INFINITY, -INFINITY}), {1, 1, 2, 2});
  CHECK(values(max_pool2d(inf, {2})) == std::vector<float>{-INFINITY});
  // Integer and reduced dtypes keep their dtype.
  Tensor xi = to(arange_image(4, 4), DType::i64);
  Tensor yi = max_pool2d(xi, {2});
  CHECK(yi.dtype() == DType::i64);
  CHECK(yi.to_vector<int64_t>() == std::vector<int64_t>{5, 7, 13, 15});
  CHECK(values(max_pool2d(to(arange_image(4, 4), DType::bf16), {2})) ==
        std::vector<float>{5, 7, 13, 15});
  CHECK(values(max_pool2d(to(arange_image(4, 4), DType::f64), {2})) ==
        std::vector<float>{5, 7, 13, 15});
  // Transposed input, 3-d input and several planes.
  CHECK(values(max_pool2d(arange_image(4, 4).transpose(2, 3), {2})) ==
        std::vector<float>{5, 13, 7, 15});
  Tensor planes = reshape(
      arange(Scalar(int64_t{0}), Scalar(int64_t{32}), Scalar(int64_t{1}), DType::f32), {2, 4, 4});
  Tensor y3 = max_pool2d(planes, {2});
  CHECK(y3.sizes() == Shape{2, 2, 2});
  CHECK(values(y3) == std::vector<float>{5, 7, 13, 15, 21, 23, 29, 31});
  CHECK(max_pool2d(zeros({0, 3, 4, 4}), {2}).sizes() == Shape{0, 3, 2, 2});
}

// ---- avg_pool2d ----

TEST_CASE("avg_pool2d hand values and count_include_pad", "[pool]") {
  Tensor x = arange_image(4, 4);
  CHECK(values(avg_pool2d(x, {2})) == std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f});
  CHECK(values(avg_pool2d(x, {2}, {2}, {1})) ==
        std::vector<float>{0, 0.75f, 0.75f, 3, 7.5f, 4.5f, 3, 6.75f, 3.75f});
  CHECK(values(avg_pool2d(x, {2}, {2}, {1}, false, false)) ==
        std::vector<float>{0, 1.5f, 3, 6, 7.5f, 9, 12, 13.5f, 15});
  CHECK(values(avg_pool2d(x, {3, 1}, {1, 3})) == std::vector<float>{4, 7, 8, 11});
  CHECK(values(avg_pool2d(to(x, DType::f64), {2})) == std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f});
  CHECK(values(avg_pool2d(to(x, DType::bf16), {2})) ==
        std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f});
  // Integers divide with truncation.
  CHECK(avg_pool2d(to(x, DType::i64), {2}).to_vector<int64_t>() ==
        std::vector<int64_t>{2, 4, 10, 12});
}

TEST_CASE("avg_pool2d ceil_mode windows divide by their clipped size", "[pool]") {
  Tensor x = arange_image(5, 5);
  Tensor y = avg_pool2d(x, {2}, {2}, {0}, true);
  CHECK(y.sizes() == Shape{1, 1, 3, 3});
  std::vector<float> v = values(y);
  CHECK(v[0] == 3.0f);
  CHECK(v[2] == 6.5f);  // (4 + 9) / 2: the window past the input is clipped
  CHECK(v[6] == 20.5f); // (20 + 21) / 2
  CHECK(v[8] == 24.0f);
  // With padding the divisor counts the padding up to input + padding only (PyTorch):
  // window (2, 2) of a 4x4 input, k3 s2 p1, covers rows 3..5 of which 3 is real and 4 padding.
  Tensor x4 = arange_image(4, 4);
  std::vector<float> w = values(avg_pool2d(x4, {3}, {2}, {1}, true, true));
  REQUIRE(w.size() == 9);
  CHECK(w[0] == Approx(10.0 / 9.0));
  CHECK(w[8] == 3.75f); // 15 / 4
  CHECK(values(avg_pool2d(x4, {3}, {2}, {1}, true, false))[8] == 15.0f);
}

TEST_CASE("adaptive_avg_pool2d for divisible sizes", "[pool]") {
  Tensor x = arange_image(4, 6);
  Tensor y = adaptive_avg_pool2d(x, {2, 3});
  CHECK(y.sizes() == Shape{1, 1, 2, 3});
  CHECK(values(y) == values(avg_pool2d(x, {2, 2})));
  Tensor g = adaptive_avg_pool2d(x, {1});
  CHECK(g.sizes() == Shape{1, 1, 1, 1});
  CHECK(g.item<float>() == 11.5f);
  CHECK(values(adaptive_avg_pool2d(x, {4, 6})) == values(x));
  CHECK(adaptive_avg_pool2d(grid({3, 4, 4}, 51), {2}).sizes() == Shape{3, 2, 2});
  CHECK_THROWS_WITH(
      adaptive_avg_pool2d(x, {3, 3}),
      Catch::Contains("adaptive_avg_pool2d: input [1, 1, 4, 6] to output [3, 3] needs uneven "
                      "windows, which is not supported yet"));
  CHECK_THROWS_WITH(adaptive_avg_pool2d(x, {0, 1}),
                    Catch::Contains("adaptive_avg_pool2d: output_size must be positive"));
  CHECK_THROWS_WITH(
      adaptive_avg_pool2d(zeros({4, 4}), {2}),
      Catch::Contains("adaptive_avg_pool2d: expected a 3-d (unbatched) or 4-d input, got [4, 4]"));
}

TEST_CASE("pooling errors", "[pool]") {
  Tensor x = zeros({1, 1, 4, 4});
  CHECK_THROWS_WITH(
      max_pool2d(zeros({4, 4}), {2}),
      Catch::Contains(
          "max_pool2d: expected a 3-d (C, H, W) or 4-d (N, C, H, W) input with non-zero "
          "C, H and W, got [4, 4]"));
  CHECK_THROWS_WITH(avg_pool2d(zeros({1, 0, 4, 4}), {2}),
                    Catch::Contains("avg_pool2d: expected a 3-d"));
  CHECK_THROWS_WITH(
      max_pool2d(x, {3}, {1}, {2}),
      Catch::Contains("max_pool2d: padding (2, 2) should be at most half of kernel size (3, 3)"));
  CHECK_THROWS_WITH(
      avg_pool2d(x, {2}, {1}, {0, 2}),
      Catch::Contains("avg_pool2d: padding (0, 2) should be at most half of kernel size (2, 2)"));
  CHECK_THROWS_WITH(
      max_pool2d(x, {5}),
      Catch::Contains(
          "max_pool2d: input [1, 1, 4, 4] gives output [1, 1, 0, 0], which is too small"));
  CHECK_THROWS_WITH(max_pool2d(x, {2}, {1}, {0}, {4}), Catch::Contains("which is too small"));
  CHECK_THROWS_WITH(max_pool2d(x, {0}),
                    Catch::Contains("max_pool2d: kernel_size must be positive, got (0, 0)"));
  CHECK_THROWS_WITH(avg_pool2d(x, {2}, {0}),
                    Catch::Contains("avg_pool2d: stride must be positive, got (0, 0)"));
  CHECK_THROWS_WITH(max_pool2d(x, {2}, {}, {0}, {0}),
                    Catch::Contains("max_pool2d: dilation must be positive"));
  CHECK_THROWS_WITH(max_pool2d(x, {2, 2, 2}),
                    Catch::Contains("max_pool2d: kernel_size must be one int or a pair"));
  CHECK_THROWS_WITH(max_pool2d(zeros({1, 1, 4, 4}, DType::bool_), {2}),
                    Catch::Contains("max_pool2d: bool input is not supported"));
}
