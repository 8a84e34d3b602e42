// Regressions found reviewing the pointwise, factory, cast and dispatch code: each case failed
// (silently wrong, or undefined behaviour) before its fix.
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <optional>

#include <kiln/kiln.h>

using namespace kiln;

namespace {
std::vector<float> fv(const Tensor& t) { return t.to_vector<float>(); }
std::vector<int64_t> iv(const Tensor& t) { return t.to_vector<int64_t>(); }
} // namespace

TEST_CASE("in place: writing an expanded (stride 0) view is refused, fill_ is not",
          "[regression][pointwise]") {
  // Before: add_ wrote each shared element several times (last writer wins), copy_ kept the
  // last row; PyTorch refuses both.
  const char* msg = "more than one element of the written-to tensor";
  Tensor base = tensor<float>({1, 2, 3});
  Tensor e = base.expand({2, 3});
  CHECK_THROWS_WITH(e.add_(ones({2, 3})), Catch::Contains("add: unsupported operation") &&
                                              Catch::Contains(msg) && Catch::Contains("[2, 3]"));
  CHECK_THROWS_WITH(e.add_(1), Catch::Contains(msg));
  CHECK_THROWS_WITH(e.mul_(e), Catch::Contains(msg));
  CHECK_THROWS_WITH(e.relu_(), Catch::Contains(msg));
  CHECK_THROWS_WITH(e.copy_(arange(6, DType::f32).view({2, 3})),
                    Catch::Contains("copy: unsupported operation") && Catch::Contains(msg));
  CHECK_THROWS_WITH(e.masked_fill_(tensor<bool>({true, false, true}), 0), Catch::Contains(msg));
  CHECK_THROWS_WITH(e.clamp_(0, 1), Catch::Contains(msg));
  // Refused before anything was written.
  CHECK(fv(base) == std::vector<float>{1, 2, 3});
  // A size-1 dim with stride 0 shares nothing, so it stays writable.
  Tensor one = zeros({1, 3}).expand({1, 3});
  CHECK_NOTHROW(one.add_(1));
  // fill_/zero_ write one value everywhere, so overlap is harmless (PyTorch allows it too).
  e.fill_(7);
  CHECK(fv(base) == std::vector<float>{7, 7, 7});
  e.zero_();
  CHECK(fv(base) == std::vector<float>{0, 0, 0});
}

TEST_CASE("pow: integer tensor exponents below zero give PyTorch's truncated powi",
          "[regression][pointwise]") {
  // Before: the kernel threw "integers to negative integer powers are not allowed", which
  // PyTorch raises only for a Scalar exponent.
  Tensor b = tensor<int64_t>({2, 1, -1, -1, 0, -2, 7});
  Tensor e = tensor<int64_t>({-1, -3, -3, -2, -1, -1, std::numeric_limits<int64_t>::min()});
  CHECK(iv(pow(b, e)) == std::vector<int64_t>{0, 1, -1, 1, 0, 0, 0});
  Tensor b8 = tensor<int8_t>({-1, 3});
  CHECK(pow(b8, tensor<int8_t>({-128, -1})).to_vector<int8_t>() == std::vector<int8_t>{1, 0});
  // A 0-d tensor exponent is a tensor too.
  CHECK(iv(pow(tensor<int32_t>({1, 2}), scalar_tensor(-2))) == std::vector<int64_t>{1, 0});
  // The Scalar form keeps PyTorch's error, for bool bases as well (bool ^ int is i64).
  CHECK_THROWS_WITH(pow(tensor<int32_t>({2}), -1),
                    Catch::Contains("integers to negative integer powers are not allowed"));
  CHECK_THROWS_WITH(pow(tensor<bool>({true}), -1),
                    Catch::Contains("integers to negative integer powers are not allowed"));
  CHECK(iv(pow(tensor<bool>({true, false}), 2)) == std::vector<int64_t>{1, 0});
}

TEST_CASE("clamp_: a float bound on an integer tensor is refused, not truncated",
          "[regression][pointwise]") {
  // Before: clamp_ copied the f32 result back into the i64 tensor, giving [1, 2, 3].
  Tensor x = tensor<int64_t>({1, 2, 3});
  CHECK_THROWS_WITH(x.clamp_(1.5, std::nullopt),
                    Catch::Contains("clamp_: result type f32 can't be cast to the desired output "
                                    "type i64"));
  CHECK(iv(x) == std::vector<int64_t>{1, 2, 3});
  CHECK(fv(clamp(x, 1.5, std::nullopt)) == std::vector<float>{1.5f, 2, 3});
  x.clamp_(2, std::nullopt);
  CHECK(iv(x) == std::vector<int64_t>{2, 2, 3});
  Tensor h = tensor<float>({-1, 0.25f, 3}).to(DType::f16);
  h.clamp_(0, 2.5);
  CHECK(h.dtype() == DType::f16);
  CHECK(fv(h) == std::vector<float>{0, 0.25f, 2.5f});
}

TEST_CASE("arange: integer-dtype bounds outside int64 are an error", "[regression][factory]") {
  // Before: the bounds went through a double → int64 cast, undefined beyond 2^63 and for an
  // infinite step; PyTorch's checked conversion refuses them.
  CHECK_THROWS_WITH(arange(0, 1e30, 1, DType::i64),
                    Catch::Contains("arange: value") &&
                        Catch::Contains("cannot be converted to i64"));
  CHECK_THROWS_WITH(arange(-1e19, 0, 1, DType::i32), Catch::Contains("cannot be converted"));
  CHECK_THROWS_WITH(arange(0, 10, std::numeric_limits<double>::infinity(), DType::i64),
                    Catch::Contains("cannot be converted"));
  // In range, float bounds are truncated, as before.
  CHECK(iv(arange(0.5, 4.5, 1, DType::i32)) == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(iv(arange(-9.2e18, -9.2e18 + 4096, 1024.0, DType::i64)).size() == 4);
}

TEST_CASE("in place: aliased inputs in another layout still read before written",
          "[regression][pointwise]") {
  // Guards the dispatch change that allocates a temporary only when one is needed.
  Tensor x = arange(9, DType::f32).view({3, 3});
  x.add_(x.t());
  CHECK(fv(x) == std::vector<float>{0, 4, 8, 4, 8, 12, 8, 12, 16});
  Tensor y = arange(5, DType::f32);
  y.slice(0, 1, 5).add_(y.slice(0, 0, 4));
  CHECK(fv(y) == std::vector<float>{0, 1, 3, 5, 7});
  Tensor h = zeros({2, 2}, DType::f16);
  uint64_t v = h.version();
  h.t().add_(tensor<float>({1, 2, 3, 4}).view({2, 2})); // f32 result cast into f16
  CHECK(fv(h) == std::vector<float>{1, 3, 2, 4});
  CHECK(h.version() > v);
  Tensor big = zeros({200, 300});
  big.t().add_(ones({300, 200}));
  big.add_(big.t().t());
  CHECK(fv(sum(big))[0] == 120000);
}

TEST_CASE("add with alpha: the result dtype is result_type(a, b)", "[regression][pointwise]") {
  // Before: b * alpha was promoted on its own, so a bool b gave i64 (alpha 2) or f32 (alpha
  // 2.5) and lifted the sum above PyTorch's dtype.
  Tensor xi = tensor<int32_t>({1, 2});
  Tensor mask = tensor<bool>({true, false});
  Tensor r = add(xi, mask, 2);
  CHECK(r.dtype() == DType::i32);
  CHECK(iv(r) == std::vector<int64_t>{3, 2});
  Tensor h = tensor<float>({1, 2}).to(DType::f16);
  Tensor rh = add(h, mask, 2.5);
  CHECK(rh.dtype() == DType::f16);
  CHECK(fv(rh) == std::vector<float>{3.5f, 2});
  Tensor u = tensor<uint8_t>({250, 1});
  Tensor ru = add(u, tensor<uint8_t>({3, 4}), 2);
  CHECK(ru.dtype() == DType::u8);
  CHECK(iv(ru) == std::vector<int64_t>{0, 9}); // 250 + 6 wraps
  // A 0-d b keeps its precision: 1 + 3 * (1 + 2^-20) in f32, not b rounded to f16 first.
  Tensor b0 = scalar_tensor(1.0 + 0x1p-20, DType::f64);
  CHECK(add(tensor<float>({1}), b0, 3).dtype() == DType::f32);
  CHECK(add(h, b0, 2).dtype() == DType::f16);
  CHECK(fv(add(tensor<float>({1, 2}), tensor<double>({0.5, 1.5}), 2)) == std::vector<float>{2, 5});
  CHECK(add(tensor<float>({1, 2}), tensor<double>({0.5, 1.5}), 2).dtype() == DType::f64);
  CHECK_THROWS_WITH(add(xi, mask, 2.5), Catch::Contains("alpha must not be a floating point"));
}
