// matmul, bmm and linear against a naive triple loop, on both the oneDNN and the loop path.
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

/// Naive batched matmul in double with numpy broadcasting of the batch dims (rank >= 2).
std::vector<double> naive_matmul(const Tensor& ta, const Tensor& tb, Shape& out_shape) {
  const std::vector<double> a = ta.to_vector<double>(), b = tb.to_vector<double>();
  Shape as = ta.sizes(), bs = tb.sizes();
  const size_t r = std::max(as.size(), bs.size());
  while (as.size() < r)
    as.insert(as.begin(), 1);
  while (bs.size() < r)
    bs.insert(bs.begin(), 1);
  const int64_t n = as[r - 2], k = as[r - 1], m = bs[r - 1];
  out_shape.assign(r, 0);
  int64_t nb = 1;
  for (size_t d = 0; d + 2 < r; ++d)
    nb *= (out_shape[d] = std::max(as[d], bs[d]));
  out_shape[r - 2] = n;
  out_shape[r - 1] = m;
  std::vector<double> out(static_cast<size_t>(nb * n * m), 0.0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t rem = bi, ai = 0, bj = 0, astride = 1, bstride = 1;
    for (int64_t d = static_cast<int64_t>(r) - 3; d >= 0; --d) {
      const int64_t idx = rem % out_shape[d];
      rem /= out_shape[d];
      ai += (as[d] == 1 ? 0 : idx) * astride;
      bj += (bs[d] == 1 ? 0 : idx) * bstride;
      astride *= as[d];
      bstride *= bs[d];
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += a[ai * n * k + i * k + p] * b[bj * k * m + p * m + j];
        out[bi * n * m + i * m + j] = s;
      }
  }
  return out;
}

/// Checks matmul(a, b) against the reference; tol = 0 demands exact equality.
void check_matmul(const Tensor& a, const Tensor& b, double tol = 0.0) {
  Shape expected_shape;
  std::vector<double> expected = naive_matmul(a, b, expected_shape);
  Tensor c = matmul(a, b);
  REQUIRE(c.sizes() == expected_shape);
  CHECK(c.dtype() == a.dtype());
  std::vector<double> got = c.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(got[i] - expected[i]) <= tol * (1.0 + std::abs(expected[i])));
  }
}

} // namespace

TEST_CASE("matmul 2-d matches the naive loop for f32, f64 and integers", "[matmul]") {
  const bool use_onednn = GENERATE(true, false);
  OnednnMode mode(use_onednn);
  Tensor a = grid({5, 7}, 1), b = grid({7, 3}, 2);
  check_matmul(a, b);
  check_matmul(to(a, DType::f64), to(b, DType::f64));
  Tensor ai = to(mul(a, 8.0), DType::i64), bi = to(mul(b, 8.0), DType::i64);
  check_matmul(ai, bi);
  check_matmul(to(ai, DType::i32), to(bi, DType::i32));
  // A 1x1 product and a row times a column.
  check_matmul(grid({1, 1}, 3), grid({1, 1}, 4));
  check_matmul(grid({1, 9}, 5), grid({9, 1}, 6));
}

TEST_CASE("matmul hand-computed values", "[matmul]") {
  Tensor a = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor<float>({7, 8, 9, 10, 11, 12}, {3, 2});
  CHECK(matmul(a, b).to_vector<float>() == std::vector<float>{58, 64, 139, 154});
  CHECK(a.matmul(b).sizes() == Shape{2, 2});
}

TEST_CASE("matmul of small integers wraps in their own width", "[matmul]") {
  // 100*2 + 100*2 = 400 wraps to -112 in int8, as PyTorch's integer matmul.
  Tensor a = to(tensor<int64_t>({100, 100}, {1, 2}), DType::i8);
  Tensor b = to(tensor<int64_t>({2, 2}, {2, 1}), DType::i8);
  Tensor c = matmul(a, b);
  CHECK(c.dtype() == DType::i8);
  CHECK(c.to_vector<int64_t>() == std::vector<int64_t>{-112});
  Tensor big = tensor<int64_t>({std::numeric_limits<int64_t>::max(), 1}, {1, 2});
  Tensor two = tensor<int64_t>({2, 2}, {2, 1});
  CHECK(matmul(big, two).item<int64_t>() == 0); // 2 * (2^63 - 1) + 2 wraps to 0
  Tensor u = to(tensor<int64_t>({200, 100}, {1, 2}), DType::u8);
  Tensor one = to(tensor<int64_t>({1, 1}, {2, 1}), DType::u8);
  CHECK(matmul(u, one).item<int64_t>() == 44); // 300 mod 256
}

TEST_CASE("matmul bf16 and f16 accumulate in f32 and round once", "[matmul]") {
  const bool use_onednn = GENERATE(true, false);
  OnednnMode mode(use_onednn);
  for (DType t : {DType::bf16, DType::f16}) {
    Tensor a = to(grid({6, 33}, 7), t), b = to(grid({33, 5}, 8), t);
    Tensor c = matmul(a, b);
    CHECK(c.dtype() == t);
    // The f32 result rounded to the reduced type: exact grid sums, one rounding.
    Tensor ref = to(matmul(to(a, DType::f32), to(b, DType::f32)), t);
    CHECK(c.to_vector<float>() == ref.to_vector<float>());
  }
  // Rounding happens once at the end: 256 + 1 + 1 is 258 in f32 but 256 step-by-step in bf16.
  Tensor a = to(tensor<float>({256, 1, 1}, {1, 3}), DType::bf16);
  Tensor b = to(tensor<float>({1, 1, 1}, {3, 1}), DType::bf16);
  CHECK(matmul(a, b).item<float>() == 258.0f);
}

TEST_CASE("matmul accepts transposed, sliced and expanded operands", "[matmul]") {
  const bool use_onednn = GENERATE(true, false);
  OnednnMode mode(use_onednn);
  Tensor a = grid({6, 4}, 11), b = grid({5, 6}, 12);
  // Transposed (column-major) operands.
  check_matmul(a.t(), b.t());
  check_matmul(transpose(grid({3, 8}, 13), 0, 1).t(), grid({8, 2}, 14));
  // Slices with a step: neither row- nor column-major, so the library path packs them.
  Tensor big = grid({9, 10}, 15);
  check_matmul(big.slice(0, 0, 9, 2).slice(1, 1, 10, 3), grid({3, 4}, 16));
  check_matmul(grid({2, 5}, 17), big.slice(0, 1, 6).slice(1, 0, 10, 2));
  // Storage offset and a stride-0 (expanded) operand.
  check_matmul(big.slice(0, 3, 5), grid({10, 3}, 18));
  check_matmul(expand(grid({1, 4}, 19), {3, 4}), grid({4, 2}, 20));
  check_matmul(grid({2, 4}, 21), expand(grid({4, 1}, 22), {4, 3}));
  // f64 and integer loops honour strides too.
  check_matmul(to(a, DType::f64).t(), to(b, DType::f64).t());
  check_matmul(to(mul(big, 8.0), DType::i64).slice(1, 0, 10, 3),
               to(mul(grid({4, 2}, 23), 8.0), DType::i64));
}

TEST_CASE("matmul broadcasts batch dims", "[matmul]") {
  const bool use_onednn = GENERATE(true, false);
  OnednnMode mode(use_onednn);
  Tensor a = grid({2, 1, 3, 4}, 31), b = grid({5, 4, 2}, 32);
  CHECK(matmul(a, b).sizes() == Shape{2, 5, 3, 2});
  check_matmul(a, b);
  check_matmul(grid({3, 2, 4}, 33), grid({4, 5}, 34));
  check_matmul(grid({2, 3}, 35), grid({4, 3, 2}, 36));
  check_matmul(to(a, DType::f64), to(b, DType::f64));
  // A permuted batch: batch strides are not the packed ones.
  check_matmul(permute(grid({3, 4, 2}, 37), {1, 0, 2}).transpose(1, 2), grid({4, 3, 5}, 38));
}

TEST_CASE("matmul with 1-d operands follows torch.matmul", "[matmul]") {
  const bool use_onednn = GENERATE(true, false);
  OnednnMode mode(use_onednn);
  Tensor v = tensor<float>({1, 2, 3});
  Tensor w = tensor<float>({4, 5, 6});
  Tensor dot = matmul(v, w);
  CHECK(dot.dim() == 0);
  CHECK(dot.item<float>() == 32.0f);
  Tensor m = tensor<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor vm = matmul(v, m); // [3] @ [3, 2] -> [2]
  CHECK(vm.sizes() == Shape{2});
  CHECK(vm.to_vector<float>() == std::vector<float>{22, 28});
  Tensor mv = matmul(m.t(), v); // [2, 3] @ [3] -> [2]
  CHECK(mv.sizes() == Shape{2});
  CHECK(mv.to_vector<float>() == std::vector<float>{22, 28});
  // Batched with a vector on either side.
  Tensor bm = grid({4, 3, 2}, 41);
  Tensor r1 = matmul(v, bm);
  CHECK(r1.sizes() == Shape{4, 2});
  Shape s;
  std::vector<double> ref = naive_matmul(reshape(v, {1, 3}), bm, s);
  CHECK(r1.to_vector<double>() == ref);
  Tensor r2 = matmul(bm.transpose(1, 2), v);
  CHECK(r2.sizes() == Shape{4, 2});
  CHECK(r2.to_vector<double>() == ref);
  // Empty vectors give a zero dot product.
  CHECK(matmul(zeros({0}), zeros({0})).item<float>() == 0.0f);
}

TEST_CASE("matmul with empty dims", "[matmul]") {
  const bool use_onednn = GENERATE(true, false);
  OnednnMode mode(use_onednn);
  for (DType t : {DType::f32, DType::f64, DType::i64, DType::bf16}) {
    Tensor c = matmul(empty({3, 0}, t), empty({0, 4}, t)); // k = 0: zeros
    CHECK(c.sizes() == Shape{3, 4});
    CHECK(c.to_vector<double>() == std::vector<double>(12, 0.0));
  }
  CHECK(matmul(zeros({0, 3}), zeros({3, 4})).sizes() == Shape{0, 4});
  CHECK(matmul(zeros({2, 3}), zeros({3, 0})).sizes() == Shape{2, 0});
  CHECK(matmul(zeros({0, 2, 3}), zeros({3, 4})).sizes() == Shape{0, 2, 4});
  CHECK(matmul(zeros({1, 2, 3}), zeros({0, 3, 4})).sizes() == Shape{0, 2, 4});
}

TEST_CASE("matmul propagates NaN and Inf", "[matmul]") {
  const bool use_onednn = GENERATE(true, false);
  OnednnMode mode(use_onednn);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Tensor a = tensor<float>({nan, 1, 2, 3}, {2, 2});
  Tensor b = tensor<float>({1, 0, 0, 1}, {2, 2});
  std::vector<float> c = matmul(a, b).to_vector<float>();
  CHECK(std::isnan(c[0]));
  CHECK(std::isnan(c[1])); // NaN * 0 is NaN
  CHECK(c[2] == 2.0f);
  CHECK(c[3] == 3.0f);
  Tensor i = tensor<float>({inf, 1}, {1, 2});
  std::vector<float> d = matmul(i, tensor<float>({0, 1, 1, 1}, {2, 2})).to_vector<float>();
  CHECK(std::isnan(d[0])); // Inf * 0
  CHECK(d[1] == inf);
}

TEST_CASE("matmul on larger problems agrees between oneDNN and the loops", "[matmul]") {
  // Sizes large enough for parallel chunks and the library's blocked kernels; values off
  // the grid so the two paths round differently but stay close.
  Tensor a = rand({70, 130}), b = rand({130, 90});
  Tensor batched_a = rand({40, 9, 17}), batched_b = rand({40, 17, 6});
  Tensor loop_c, loop_bc;
  {
    OnednnMode mode(false);
    loop_c = matmul(a, b);
    loop_bc = matmul(batched_a, batched_b.transpose(1, 2).contiguous().transpose(1, 2));
  }
  Tensor lib_c = matmul(a, b);
  Tensor lib_bc = matmul(batched_a, batched_b);
  std::vector<float> x = loop_c.to_vector<float>(), y = lib_c.to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i)
    REQUIRE(std::abs(x[i] - y[i]) <= 1e-4f * (1.0f + std::abs(x[i])));
  x = loop_bc.to_vector<float>();
  y = lib_bc.to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i)
    REQUIRE(std::abs(x[i] - y[i]) <= 1e-4f * (1.0f + std::abs(x[i])));
  // And the loops against the double reference.
  Shape s;
  std::vector<double> ref = naive_matmul(a, b, s);
  x = loop_c.to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i)
    REQUIRE(std::abs(x[i] - ref[i]) <= 1e-4 * (1.0 + std::abs(ref[i])));
}

TEST_CASE("matmul errors name the op and the shapes", "[matmul]") {
  CHECK_THROWS_WITH(
      matmul(zeros({2, 3}), zeros({4, 5})),
      Catch::Contains("matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)"));
  CHECK_THROWS_WITH(matmul(zeros({3}), zeros({4})),
                    Catch::Contains("matmul: shapes [3] and [4] cannot be multiplied (3 != 4)"));
  CHECK_THROWS_WITH(
      matmul(zeros({3}), zeros({2, 4, 5})),
      Catch::Contains("matmul: shapes [3] and [2, 4, 5] cannot be multiplied (3 != 4)"));
  CHECK_THROWS_WITH(matmul(zeros({2, 3}), zeros({2})),
                    Catch::Contains("matmul: shapes [2, 3] and [2] cannot be multiplied (3 != 2)"));
  CHECK_THROWS_WITH(
      matmul(zeros({2, 2}), zeros({2, 2}, DType::f64)),
      Catch::Contains("matmul: expected both operands to have the same dtype, got f32 and f64"));
  CHECK_THROWS_WITH(matmul(zeros({2, 2}, DType::bool_), zeros({2, 2}, DType::bool_)),
                    Catch::Contains("matmul: bool operands are not supported"));
  CHECK_THROWS_WITH(matmul(scalar_tensor(1.0f), zeros({2})),
                    Catch::Contains("matmul: both arguments need at least 1 dim, got [] and [2]"));
  CHECK_THROWS_WITH(
      matmul(zeros({2, 3, 4}), zeros({3, 4, 5})),
      Catch::Contains("matmul: batch dims of [2, 3, 4] and [3, 4, 5] cannot be broadcast"));
}

TEST_CASE("bmm multiplies equal batches and checks its shapes", "[matmul]") {
  Tensor a = grid({3, 2, 4}, 51), b = grid({3, 4, 5}, 52);
  Tensor c = bmm(a, b);
  Shape s;
  CHECK(c.sizes() == Shape{3, 2, 5});
  CHECK(c.to_vector<double>() == naive_matmul(a, b, s));
  CHECK_THROWS_WITH(bmm(zeros({2, 3}), zeros({3, 2})),
                    Catch::Contains("bmm: expected 3-d tensors, got [2, 3] and [3, 2]"));
  CHECK_THROWS_WITH(bmm(zeros({2, 2, 3}), zeros({1, 3, 2})),
                    Catch::Contains("bmm: batch sizes differ: [2, 2, 3] and [1, 3, 2]"));
  CHECK_THROWS_WITH(bmm(zeros({2, 2, 3}), zeros({2, 4, 2})),
                    Catch::Contains("cannot be multiplied (3 != 4)"));
}

TEST_CASE("linear is x @ w^T + bias", "[matmul]") {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = tensor<float>({1, 0, -1, 2, 1, 0}, {2, 3}); // [out = 2, in = 3]
  Tensor bias = tensor<float>({10, 20});
  CHECK(linear(x, w).to_vector<float>() == std::vector<float>{-2, 4, -2, 13});
  Tensor y = linear(x, w, bias);
  CHECK(y.sizes() == Shape{2, 2});
  CHECK(y.to_vector<float>() == std::vector<float>{8, 24, 8, 33});
  // Leading batch dims and a 1-d weight (a dot product per row).
  Tensor xb = reshape(tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3}), {2, 1, 3});
  CHECK(linear(xb, w, bias).sizes() == Shape{2, 1, 2});
  CHECK(linear(x, tensor<float>({1, 1, 1})).to_vector<float>() == std::vector<float>{6, 15});
  CHECK_THROWS_WITH(
      linear(x, zeros({2, 4})),
      Catch::Contains("matmul: shapes [2, 3] and [4, 2] cannot be multiplied (3 != 4)"));
  CHECK_THROWS_WITH(linear(x, zeros({1, 2, 3})),
                    Catch::Contains("linear: weight must be 1-d or 2-d, got [1, 2, 3]"));
}

TEST_CASE("matmul of batches against one matrix: one GEMM when the batches are rows", "[matmul]") {
  // [3, 50, 20] @ [20, 7] folds the batches into one 150-row GEMM; a sliced A (batches not
  // back to back) and a transposed A keep one GEMM per batch. All agree with the loops.
  Tensor big = rand({3, 60, 20});
  Tensor w = rand({7, 20});
  for (const Tensor& a : {rand({3, 50, 20}), big.narrow(1, 5, 50),
                          rand({3, 20, 50}).transpose(1, 2), rand({1, 50, 20})}) {
    Tensor loop;
    {
      OnednnMode mode(false);
      loop = matmul(a, w.t());
    }
    Tensor lib = matmul(a, w.t());
    REQUIRE(lib.sizes() == loop.sizes());
    std::vector<float> x = loop.to_vector<float>(), y = lib.to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i)
      REQUIRE(std::abs(x[i] - y[i]) <= 1e-4f * (1.0f + std::abs(x[i])));
  }
}

TEST_CASE("matmul with equal batch dims runs as one batched call over strided heads", "[matmul]") {
  // Attention's shapes: q [B, H, T, D] as a transposed view of [B, T, H, D], k^T, and a
  // broadcast batch (which takes the matrix-by-matrix path). All agree with the loops.
  Tensor q = rand({2, 9, 3, 8}).transpose(1, 2);  // [2, 3, 9, 8], strided heads
  Tensor k = rand({2, 11, 3, 8}).transpose(1, 2); // [2, 3, 11, 8]
  Tensor v = rand({2, 3, 11, 5});
  Tensor one = rand({1, 3, 8, 11}); // broadcast over the first batch dim
  std::vector<std::pair<Tensor, Tensor>> cases{
      {q, k.transpose(2, 3)}, {matmul(q, k.transpose(2, 3)), v}, {q, one}};
  for (const auto& [a, b] : cases) {
    Tensor loop;
    {
      OnednnMode mode(false);
      loop = matmul(a, b);
    }
    Tensor lib = matmul(a, b);
    REQUIRE(lib.sizes() == loop.sizes());
    std::vector<float> x = loop.to_vector<float>(), y = lib.to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i)
      REQUIRE(std::abs(x[i] - y[i]) <= 1e-4f * (1.0f + std::abs(x[i])));
  }
}
