// Eager kernels of the factories: empty (nothing to do), full and arange, into any strides.
#include "runtime/kernels/convert.h"
#include "runtime/kernels/indexed_fill.h"
#include "runtime/ops/op.h"

namespace kiln::ops {
namespace {

/// The scalar converted to T by the cast rules (kernels/convert.h).
template <typename T> T scalar_as(const Scalar& v) {
  if (v.is_floating()) return kernels::convert<T>(v.to_double());
  if (v.is_integral()) return kernels::convert<T>(v.to_int());
  return kernels::convert<T>(v.to_int() != 0);
}

} // namespace

void kernel_empty(std::span<const Tensor>, const Attrs&, std::span<Tensor>) {}

void kernel_full(std::span<const Tensor>, const Attrs& a, std::span<Tensor> out) {
  visit_dtype(out[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T value = scalar_as<T>(a.scalar(1));
    kernels::fill_indexed<T>(out[0], [value] { return [value](int64_t) { return value; }; });
  });
}

// Element i is start + i * step, in int64 for integer dtypes (bounds truncated, as PyTorch)
// and in double for floating ones, then converted to the dtype.
void kernel_arange(std::span<const Tensor>, const Attrs& a, std::span<Tensor> out) {
  const Scalar &start = a.scalar(0), &step = a.scalar(2);
  visit_dtype(out[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kernels::is_floating_v<T>) {
      double s = start.to_double(), st = step.to_double();
      kernels::fill_indexed<T>(out[0], [=] {
        return [=](int64_t i) { return kernels::convert<T>(s + st * static_cast<double>(i)); };
      });
    } else {
      // Unsigned arithmetic: wraps instead of overflowing when the dtype is narrow.
      uint64_t s = static_cast<uint64_t>(start.to_int()), st = static_cast<uint64_t>(step.to_int());
      kernels::fill_indexed<T>(out[0], [=] {
        return [=](int64_t i) {
          return kernels::convert<T>(static_cast<int64_t>(s + st * static_cast<uint64_t>(i)));
        };
      });
    }
  });
}

} // namespace kiln::ops
