// Eager kernel of where(cond, a, b): a and b converted to the output dtype, any strides.
#include "runtime/kernels/loop_driver.h"
#include "runtime/ops.h"
#include "runtime/ops/op.h"

namespace kiln::ops {

void kernel_where(std::span<const Tensor> in, const Attrs&, std::span<Tensor> out) {
  const Tensor& o = out[0];
  const Tensor a = to(in[1], o.dtype()), b = to(in[2], o.dtype());
  visit_dtype(o.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto plan = kernels::make_loop_plan<4>(o.sizes(), {&o, &in[0], &a, &b});
    kernels::run_runs(
        plan,
        [](const void*, const std::array<char*, 4>& p, const std::array<int64_t, 4>& s, int64_t n) {
          if (s[0] == sizeof(T) && s[1] == 1 && s[2] == sizeof(T) && s[3] == sizeof(T)) {
            auto* r = reinterpret_cast<T*>(p[0]);
            const auto* c = reinterpret_cast<const bool*>(p[1]);
            const auto* x = reinterpret_cast<const T*>(p[2]);
            const auto* y = reinterpret_cast<const T*>(p[3]);
            for (int64_t i = 0; i < n; ++i)
              r[i] = c[i] ? x[i] : y[i];
          } else {
            for (int64_t i = 0; i < n; ++i)
              *reinterpret_cast<T*>(p[0] + i * s[0]) =
                  *reinterpret_cast<const bool*>(p[1] + i * s[1])
                      ? *reinterpret_cast<const T*>(p[2] + i * s[2])
                      : *reinterpret_cast<const T*>(p[3] + i * s[3]);
          }
        },
        nullptr);
  });
}

} // namespace kiln::ops
