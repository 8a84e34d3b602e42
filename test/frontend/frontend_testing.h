// Helpers for the frontend tests: bit-for-bit tensor comparison.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include <kiln/kiln.h>

namespace kiln::testing {

/// Same dtype, shape and bytes (NaNs with the same bits compare equal).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(),
                     static_cast<size_t>(ca.numel() * ca.itemsize())) == 0;
}

/// Same dtype and shape; integers and bools equal, floats within torch.testing's
/// tolerances for the dtype (NaN equals NaN, infinities exact). Fused kernels reorder sums
/// and compute transcendental functions with their own polynomials, so a compiled result is
/// close to eager, not always bit-identical.
inline bool close_to(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.sizes() != want.sizes()) return false;
  if (!is_floating(want.dtype())) return bitwise_equal(got, want);
  double rtol = 1.3e-6, atol = 1e-5;
  if (want.dtype() == DType::f64) rtol = atol = 1e-7;
  if (want.dtype() == DType::f16) rtol = 1e-3;
  if (want.dtype() == DType::bf16) rtol = 1.6e-2;
  std::vector<double> x = got.to(DType::f64).contiguous().to_vector<double>();
  std::vector<double> y = want.to(DType::f64).contiguous().to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != x[i] || y[i] != y[i]) {
      if ((x[i] != x[i]) != (y[i] != y[i])) return false;
    } else if (std::isinf(x[i]) || std::isinf(y[i])) {
      if (x[i] != y[i]) return false;
    } else if (std::abs(x[i] - y[i]) > atol + rtol * std::abs(y[i])) {
      return false;
    }
  }
  return true;
}

/// Evaluates each side once (a compiled call counts in the stats).
#define KILN_REQUIRE_BITWISE(a, b)                                                                 \
  do {                                                                                             \
    const ::kiln::Tensor kiln_got_ = (a);                                                          \
    const ::kiln::Tensor kiln_want_ = (b);                                                         \
    INFO("expected " << kiln_want_ << "\ngot " << kiln_got_);                                      \
    REQUIRE(::kiln::testing::bitwise_equal(kiln_got_, kiln_want_));                                \
  } while (0)

/// A compiled result against eager code: close_to.
#define KILN_REQUIRE_CLOSE(a, b)                                                                   \
  do {                                                                                             \
    const ::kiln::Tensor kiln_got_ = (a);                                                          \
    const ::kiln::Tensor kiln_want_ = (b);                                                         \
    INFO("expected " << kiln_want_ << "\ngot " << kiln_got_);                                      \
    REQUIRE(::kiln::testing::close_to(kiln_got_, kiln_want_));                                     \
  } while (0)

} // namespace kiln::testing
