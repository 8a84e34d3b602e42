// Eager kernels of the pointwise arithmetic ops: add, sub, mul, div, floor_divide, remainder,
// pow, maximum, minimum. They compute in the output dtype (f16/bf16 in f32, rounded once).
#include <cmath>
#include <type_traits>

#include "runtime/kernels/binary_loop.h"
#include "runtime/kernels/convert.h"
#include "runtime/ops/op.h"

namespace kiln::ops {
namespace {

/// Out of line so that the loops which can fail stay small (they are compiled per dtype).
[[noreturn]] __attribute__((noinline)) void fail(const char* message) { throw Error(message); }

template <typename C>
inline constexpr bool is_int_v = std::is_integral_v<C> && !std::is_same_v<C, bool>;

// Integer add/sub/mul wrap modulo 2^bits: done in unsigned arithmetic, where C++ defines it.
template <typename C> C wrap_add(C x, C y) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(x) + static_cast<U>(y));
}
template <typename C> C wrap_sub(C x, C y) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(x) - static_cast<U>(y));
}
template <typename C> C wrap_mul(C x, C y) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(x) * static_cast<U>(y));
}

// Python's // and % on integers: the quotient rounds toward -inf, the remainder takes the
// divisor's sign. x / -1 is special-cased because INT_MIN / -1 overflows in C++.
template <typename C> C int_floor_divide(C x, C y) {
  if (y == 0) fail("floor_divide: integer division by zero");
  if constexpr (std::is_signed_v<C>) {
    if (y == -1) return wrap_sub(C(0), x);
    C q = static_cast<C>(x / y), r = static_cast<C>(x % y);
    if (r != 0 && ((r < 0) != (y < 0))) --q;
    return q;
  } else {
    return static_cast<C>(x / y);
  }
}
template <typename C> C int_remainder(C x, C y) {
  if (y == 0) fail("remainder: integer division by zero");
  if constexpr (std::is_signed_v<C>) {
    if (y == -1) return 0;
    C r = static_cast<C>(x % y);
    if (r != 0 && ((r < 0) != (y < 0))) r = static_cast<C>(r + y);
    return r;
  } else {
    return static_cast<C>(x % y);
  }
}

// PyTorch's div_floor_floating: floor of the exact quotient via fmod, so that e.g.
// 1 // 0.1 = 9 (not floor(1 / 0.1) = 10); division by zero gives the IEEE quotient.
template <typename C> C float_floor_divide(C x, C y) {
  if (y == 0) return x / y;
  C mod = std::fmod(x, y);
  C div = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1;
  if (div == 0) return std::copysign(C(0), x / y);
  C floordiv = std::floor(div);
  if (div - floordiv > C(0.5)) floordiv += 1;
  return floordiv;
}
// PyTorch's float remainder: fmod, moved into the divisor's sign.
template <typename C> C float_remainder(C x, C y) {
  C mod = std::fmod(x, y);
  if (mod != 0 && ((y < 0) != (mod < 0))) mod += y;
  return mod;
}

/// Integer power by squaring (wrapping). A negative tensor exponent gives the truncated
/// quotient 1 / base^-exp, as PyTorch's powi: 1 for base 1, ±1 for base -1, else 0 (only a
/// Scalar exponent is refused, in kiln::pow).
template <typename C> C int_pow(C base, C exp) {
  if constexpr (std::is_signed_v<C>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return exp % 2 != 0 ? C(-1) : C(1);
      return 0;
    }
  }
  using U = std::make_unsigned_t<C>;
  U result = 1, b = static_cast<U>(base);
  for (auto e = exp; e != 0; e = static_cast<C>(e / 2)) {
    if (e % 2) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<C>(result);
}

/// Which dtypes an op's kernel is compiled for (inference refuses the others).
enum class Types { all, no_bool, floating };

/// Runs f over the output dtype, which every operand is converted to; `precise_scalar` as in
/// kernels::binary_loop. f is instantiated only for the dtypes of `kTypes`.
template <Types kTypes, typename F>
void arithmetic(std::span<const Tensor> in, std::span<Tensor> out, bool precise_scalar, F f) {
  const Tensor& o = out[0];
  visit_dtype(o.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr bool admitted = kTypes == Types::all ||
                              (kTypes == Types::no_bool && !std::is_same_v<T, bool>) ||
                              (kTypes == Types::floating && kernels::is_floating_v<T>);
    if constexpr (admitted)
      kernels::binary_loop<T, T>(o, in[0], in[1], precise_scalar, f);
    else
      KILN_UNREACHABLE("pointwise kernel reached with a dtype its inference refuses");
  });
}

} // namespace

void kernel_add(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  arithmetic<Types::all>(in, out, true, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (is_int_v<C>)
      return wrap_add(x, y);
    else if constexpr (std::is_same_v<C, bool>)
      return x || y;
    else
      return x + y;
  });
}

void kernel_sub(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  arithmetic<Types::no_bool>(in, out, true, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (is_int_v<C>)
      return wrap_sub(x, y);
    else
      return x - y;
  });
}

void kernel_mul(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  arithmetic<Types::all>(in, out, true, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (is_int_v<C>)
      return wrap_mul(x, y);
    else if constexpr (std::is_same_v<C, bool>)
      return x && y;
    else
      return x * y;
  });
}

void kernel_div(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  arithmetic<Types::floating>(in, out, true, [](auto x, auto y) { return x / y; });
}

void kernel_floor_divide(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  arithmetic<Types::no_bool>(in, out, false, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>)
      return float_floor_divide(x, y);
    else
      return int_floor_divide(x, y);
  });
}

void kernel_remainder(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  arithmetic<Types::no_bool>(in, out, false, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>)
      return float_remainder(x, y);
    else
      return int_remainder(x, y);
  });
}

// x^2 is computed as x * x, exactly rounded (as PyTorch does for a scalar exponent of 2).
void kernel_pow(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  arithmetic<Types::no_bool>(in, out, false, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>)
      return y == C(2) ? x * x : std::pow(x, y);
    else
      return int_pow(x, y);
  });
}

// NaN propagates from either side; otherwise std::max/std::min order (maximum(-0.0, 0.0) is
// the first operand, as PyTorch's CPU kernel).
void kernel_maximum(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  arithmetic<Types::all>(in, out, false, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>) {
      if (x != x) return x;
      if (y != y) return y;
    }
    return x < y ? y : x;
  });
}

void kernel_minimum(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  arithmetic<Types::all>(in, out, false, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>) {
      if (x != x) return x;
      if (y != y) return y;
    }
    return y < x ? y : x;
  });
}

} // namespace kiln::ops
