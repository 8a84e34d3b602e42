// The loop behind every pointwise binary kernel: operands converted to one compute dtype, a
// 0-d operand read once as a scalar, any output strides.
#pragma once

#include <type_traits>

#include "runtime/kernels/loop_driver.h"
#include "runtime/ops.h"

namespace kiln::kernels {

/// The value of a 0-d tensor of any dtype as compute_t<T>. With `precise`, f16/bf16 compute
/// reads the value at f32 precision without rounding it to T first (PyTorch's opmath scalar
/// of add/sub/mul/div); otherwise the value is rounded to T, like any operand.
template <typename T> compute_t<T> scalar_operand(const Tensor& s, bool precise) {
  if constexpr (!std::is_same_v<compute_t<T>, T>) {
    if (precise) return *static_cast<const float*>(to(s, DType::f32).raw_data());
  }
  return static_cast<compute_t<T>>(*static_cast<const T*>(to(s, dtype_of_v<T>).raw_data()));
}

/// out[i] = f(a[i], b[i]) computed on compute_t<T>, stored as Out. a and b are converted to T
/// first (the common dtype, chosen by the caller), except that a 0-d operand beside a dim-ful
/// one is read once as a scalar (see scalar_operand), which also makes `x * 2` and `1 - x`
/// unary loops. Operands may alias out (in-place ops): each element is read before it is
/// written. Only dense runs (and runs where one operand is broadcast) get a vectorisable loop:
/// each loop body here is compiled for every (op, dtype), so the rest share one strided loop to
/// keep the build small.
template <typename T, typename Out, typename F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, bool precise_scalar, F f) {
  using C = compute_t<T>;
  constexpr DType kT = dtype_of_v<T>;
  const bool a_scalar = a.dim() == 0 && b.dim() != 0, b_scalar = b.dim() == 0 && a.dim() != 0;
  if (a_scalar || b_scalar) {
    struct Ctx {
      F f;
      C sv;
      bool first;
    } ctx{f, scalar_operand<T>(a_scalar ? a : b, precise_scalar), a_scalar};
    const Tensor t = to(a_scalar ? b : a, kT);
    auto plan = make_loop_plan<2>(out.sizes(), {&out, &t});
    run_runs(
        plan,
        [](const void* c, const std::array<char*, 2>& p, const std::array<int64_t, 2>& s,
           int64_t n) {
          const Ctx& k = *static_cast<const Ctx*>(c);
          const C sv = k.sv;
          if (s[0] == sizeof(Out) && s[1] == sizeof(T)) {
            auto* o = reinterpret_cast<Out*>(p[0]);
            const auto* x = reinterpret_cast<const T*>(p[1]);
            if (k.first) {
              for (int64_t i = 0; i < n; ++i)
                o[i] = static_cast<Out>(k.f(sv, static_cast<C>(x[i])));
            } else {
              for (int64_t i = 0; i < n; ++i)
                o[i] = static_cast<Out>(k.f(static_cast<C>(x[i]), sv));
            }
          } else {
            for (int64_t i = 0; i < n; ++i) {
              C v = static_cast<C>(*reinterpret_cast<const T*>(p[1] + i * s[1]));
              *reinterpret_cast<Out*>(p[0] + i * s[0]) =
                  static_cast<Out>(k.first ? k.f(sv, v) : k.f(v, sv));
            }
          }
        },
        &ctx);
    return;
  }
  const Tensor ta = to(a, kT), tb = to(b, kT);
  auto plan = make_loop_plan<3>(out.sizes(), {&out, &ta, &tb});
  run_runs(
      plan,
      [](const void* c, const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
        const F& f = *static_cast<const F*>(c);
        if (s[0] == sizeof(Out) && s[1] == sizeof(T) && s[2] == sizeof(T)) {
          auto* o = reinterpret_cast<Out*>(p[0]);
          const auto* x = reinterpret_cast<const T*>(p[1]);
          const auto* y = reinterpret_cast<const T*>(p[2]);
          for (int64_t i = 0; i < n; ++i)
            o[i] = static_cast<Out>(f(static_cast<C>(x[i]), static_cast<C>(y[i])));
        } else if (s[0] == sizeof(Out) && s[1] == sizeof(T) && s[2] == 0) {
          // A row broadcast along the run: x - max(x, dim=-1, keepdim=true), say.
          auto* o = reinterpret_cast<Out*>(p[0]);
          const auto* x = reinterpret_cast<const T*>(p[1]);
          const C y = static_cast<C>(*reinterpret_cast<const T*>(p[2]));
          for (int64_t i = 0; i < n; ++i)
            o[i] = static_cast<Out>(f(static_cast<C>(x[i]), y));
        } else if (s[0] == sizeof(Out) && s[1] == 0 && s[2] == sizeof(T)) {
          auto* o = reinterpret_cast<Out*>(p[0]);
          const C x = static_cast<C>(*reinterpret_cast<const T*>(p[1]));
          const auto* y = reinterpret_cast<const T*>(p[2]);
          for (int64_t i = 0; i < n; ++i)
            o[i] = static_cast<Out>(f(x, static_cast<C>(y[i])));
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<Out*>(p[0] + i * s[0]) =
                static_cast<Out>(f(static_cast<C>(*reinterpret_cast<const T*>(p[1] + i * s[1])),
                                   static_cast<C>(*reinterpret_cast<const T*>(p[2] + i * s[2]))));
        }
      },
      &f);
}

} // namespace kiln::kernels
