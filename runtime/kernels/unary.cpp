// Eager kernels of the pointwise unary ops (neg, abs, exp, ..., logical_not), any strides.
#include <cmath>
#include <type_traits>

#include "runtime/kernels/convert.h"
#include "runtime/kernels/loop_driver.h"
#include "runtime/ops.h"
#include "runtime/ops/op.h"

namespace kiln::ops {
namespace {

/// Calls fn(T{}) for the floating dtypes; inference guarantees nothing else reaches it.
template <typename Fn> void visit_floating(DType t, Fn&& fn) {
  switch (t) {
  case DType::f32: fn(float{}); return;
  case DType::f64: fn(double{}); return;
  case DType::f16: fn(Half{}); return;
  case DType::bf16: fn(BFloat16{}); return;
  default: KILN_UNREACHABLE("floating kernel reached with a non-floating dtype");
  }
}

/// out[i] = f(a[i]) for a of storage type In broadcast to out's shape, stored as Out; f takes
/// In. Like kernels::map_unary, but through the type-erased driver, which matters here: this is
/// compiled for every (op, dtype) and every pair of cast dtypes.
template <typename Out, typename In, typename F>
void unary_loop(const Tensor& out, const Tensor& a, F f) {
  auto plan = kernels::make_loop_plan<2>(out.sizes(), {&out, &a});
  kernels::run_runs(
      plan,
      [](const void* c, const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
        const F& fn = *static_cast<const F*>(c);
        if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
          auto* o = reinterpret_cast<Out*>(p[0]);
          const auto* x = reinterpret_cast<const In*>(p[1]);
          for (int64_t i = 0; i < n; ++i)
            o[i] = static_cast<Out>(fn(x[i]));
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<Out*>(p[0] + i * s[0]) =
                static_cast<Out>(fn(*reinterpret_cast<const In*>(p[1] + i * s[1])));
        }
      },
      &f);
}

/// out = f(x) in out's dtype T, the input first converted to T (an integer input of exp, say);
/// f maps compute_t<T> values and is instantiated for every T that `Visit` offers.
template <typename Visit, typename F>
void unary_in_out_dtype(std::span<const Tensor> in, std::span<Tensor> out, Visit visit, F f) {
  const Tensor& o = out[0];
  Tensor x = to(in[0], o.dtype());
  visit(o.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    unary_loop<T, T>(o, x, [f](T v) { return f(static_cast<C>(v)); });
  });
}

template <typename F> void all_types(std::span<const Tensor> in, std::span<Tensor> out, F f) {
  unary_in_out_dtype(
      in, out, [](DType t, auto&& fn) { visit_dtype(t, fn); }, f);
}

template <typename F> void floating_types(std::span<const Tensor> in, std::span<Tensor> out, F f) {
  unary_in_out_dtype(
      in, out, [](DType t, auto&& fn) { visit_floating(t, fn); }, f);
}

/// -x with two's-complement wrap for integers (-INT_MIN = INT_MIN).
template <typename C> C negate(C x) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(0) - static_cast<U>(x));
  } else {
    return -x;
  }
}

} // namespace

void kernel_neg(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  all_types(in, out, [](auto x) { return negate(x); });
}

void kernel_abs(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  all_types(in, out, [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>)
      return std::abs(x); // abs(-0.0) = 0.0
    else if constexpr (std::is_signed_v<C>)
      return x < 0 ? negate(x) : x;
    else
      return x;
  });
}

// relu(x) = x > 0 ? x : 0, so relu(-0.0) = +0.0 and relu(NaN) = NaN (kept explicitly: the
// comparison is false for NaN). PyTorch's clamp_min-based relu may return -0.0 for -0.0;
// kiln's result is never negative-signed, and it is the natural select(x > 0, x, 0) lowering.
void kernel_relu(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  all_types(in, out, [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>)
      return (x > 0 || x != x) ? x : C(0);
    else
      return x > 0 ? x : C(0);
  });
}

// floor/ceil/round of an integer is the integer itself (a copy).
void kernel_floor(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  all_types(in, out, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>)
      return std::floor(x);
    else
      return x;
  });
}
void kernel_ceil(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  all_types(in, out, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>)
      return std::ceil(x);
    else
      return x;
  });
}
// Half to even: nearbyint in the default rounding mode, as PyTorch's round.
void kernel_round(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  all_types(in, out, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>)
      return std::nearbyint(x);
    else
      return x;
  });
}

void kernel_exp(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  floating_types(in, out, [](auto x) { return std::exp(x); });
}
void kernel_log(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  floating_types(in, out, [](auto x) { return std::log(x); });
}
void kernel_sqrt(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  floating_types(in, out, [](auto x) { return std::sqrt(x); });
}
void kernel_rsqrt(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  floating_types(in, out, [](auto x) { return decltype(x)(1) / std::sqrt(x); });
}
void kernel_sin(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  floating_types(in, out, [](auto x) { return std::sin(x); });
}
void kernel_cos(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  floating_types(in, out, [](auto x) { return std::cos(x); });
}
void kernel_tanh(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  floating_types(in, out, [](auto x) { return std::tanh(x); });
}
void kernel_sigmoid(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  floating_types(in, out, [](auto x) { return decltype(x)(1) / (decltype(x)(1) + std::exp(-x)); });
}
void kernel_erf(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  floating_types(in, out, [](auto x) { return std::erf(x); });
}

void kernel_logical_not(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  visit_dtype(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    unary_loop<bool, T>(out[0], in[0], [](T v) { return static_cast<compute_t<T>>(v) == 0; });
  });
}

void kernel_cast(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  visit_dtype(in[0].dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_dtype(out[0].dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      unary_loop<To, From>(out[0], in[0], [](From v) { return kernels::convert<To>(v); });
    });
  });
}

} // namespace kiln::ops
