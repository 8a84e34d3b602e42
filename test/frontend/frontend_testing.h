// Helpers for the frontend tests: bit-for-bit tensor comparison.
#pragma once

#include <catch2/catch.hpp>
#include <cstring>

#include <kiln/kiln.h>

namespace kiln::testing {

/// Same dtype, shape and bytes (NaNs with the same bits compare equal).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(),
                     static_cast<size_t>(ca.numel() * ca.itemsize())) == 0;
}

/// Evaluates each side once (a compiled call counts in the stats).
#define KILN_REQUIRE_BITWISE(a, b)                                                                 \
  do {                                                                                             \
    const ::kiln::Tensor kiln_got_ = (a);                                                          \
    const ::kiln::Tensor kiln_want_ = (b);                                                         \
    INFO("expected " << kiln_want_ << "\ngot " << kiln_got_);                                      \
    REQUIRE(::kiln::testing::bitwise_equal(kiln_got_, kiln_want_));                                \
  } while (0)

} // namespace kiln::testing
