// Element conversion between kiln's dtypes: the one definition of what a cast does.
//
// - To bool: x != 0 (NaN is nonzero, so NaN → true).
// - Between floating types: through float for f16/bf16, rounding to nearest even (f64 → f16
//   rounds twice, through f32, as PyTorch's c10::Half does).
// - Floating → integer: truncation toward zero, as C and PyTorch. C leaves NaN and values out
//   of range undefined, so kiln fixes them: NaN → 0, values beyond int64 saturate at the int64
//   bounds, and narrower integer types then wrap modulo 2^bits (LLVM's fptosi.sat to i64 then
//   trunc; on x86 this is also what PyTorch gives for in-range values, e.g. -1.0 → u8 255).
// - Integer → integer wraps modulo 2^bits (two's complement); bool → number is 0 or 1.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/dtype.h"

namespace kiln::kernels {

/// True for float, double, Half and BFloat16.
template <typename T>
inline constexpr bool is_floating_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// Converts one element of type From to type To by the rules above.
template <typename To, typename From> inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<compute_t<From>>(v) != 0;
  } else if constexpr (is_floating_v<To>) {
    return To(static_cast<compute_t<To>>(static_cast<compute_t<From>>(v)));
  } else if constexpr (is_floating_v<From>) {
    double x = static_cast<double>(static_cast<compute_t<From>>(v));
    int64_t i;
    if (x != x)
      i = 0;
    else if (x >= 9223372036854775808.0) // 2^63
      i = std::numeric_limits<int64_t>::max();
    else if (x < -9223372036854775808.0)
      i = std::numeric_limits<int64_t>::min();
    else
      i = static_cast<int64_t>(x);
    return static_cast<To>(i);
  } else {
    return static_cast<To>(v);
  }
}

} // namespace kiln::kernels
