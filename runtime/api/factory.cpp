// The public factories: empty/zeros/ones/full, arange, rand/randn/randint, *_like, tensor().
#include <cstring>

#include "runtime/cuda/device.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/tracing.h"

namespace kiln {
namespace {

/// Where a factory's tensor is made: the options' device (checked to exist), for the
/// dispatch that `where` guards.
[[nodiscard]] FactoryDevice check_device(const TensorOptions& opts, const char* op) {
  if (!opts.device_.is_cpu())
    KILN_CHECK(cuda::is_available(), op, ": creating tensors on ", opts.device_, ": ",
               cuda::unavailable_reason());
  return FactoryDevice(opts.device_);
}

Tensor finish(Tensor t, const TensorOptions& opts) {
  if (opts.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor make_full(IntList sizes, Scalar value, const TensorOptions& opts, const char* op) {
  const FactoryDevice where = check_device(opts, op);
  return finish(
      dispatch1(Op::full, std::span<const Tensor>{}, Attrs{sizes.vec(), value, opts.dtype_}), opts);
}

/// torch.arange's dtype when none is given: i64 when every bound is integral, else f32.
DType arange_dtype(const Scalar& start, const Scalar& end, const Scalar& step) {
  bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  return integral ? DType::i64 : kDefaultFloat;
}

} // namespace

Tensor empty(IntList sizes, TensorOptions opts) {
  const FactoryDevice where = check_device(opts, "empty");
  return finish(dispatch1(Op::empty, std::span<const Tensor>{}, Attrs{sizes.vec(), opts.dtype_}),
                opts);
}

Tensor zeros(IntList sizes, TensorOptions opts) { return make_full(sizes, 0, opts, "zeros"); }
Tensor ones(IntList sizes, TensorOptions opts) { return make_full(sizes, 1, opts, "ones"); }
Tensor full(IntList sizes, Scalar value, TensorOptions opts) {
  return make_full(sizes, value, opts, "full");
}
Tensor full(IntList sizes, Scalar value) {
  return make_full(sizes, value, TensorOptions(value.default_dtype()), "full");
}

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions opts) {
  const FactoryDevice where = check_device(opts, "arange");
  return finish(
      dispatch1(Op::arange, std::span<const Tensor>{}, Attrs{start, end, step, opts.dtype_}), opts);
}
Tensor arange(Scalar end, TensorOptions opts) { return arange(0, end, 1, opts); }
Tensor arange(Scalar start, Scalar end, Scalar step) {
  return arange(start, end, step, TensorOptions(arange_dtype(start, end, step)));
}
Tensor arange(Scalar end) { return arange(0, end, 1); }

Tensor rand(IntList sizes, TensorOptions opts) {
  const FactoryDevice where = check_device(opts, "rand");
  return finish(dispatch1(Op::rand, std::span<const Tensor>{}, Attrs{sizes.vec(), opts.dtype_}),
                opts);
}

Tensor randn(IntList sizes, TensorOptions opts) {
  const FactoryDevice where = check_device(opts, "randn");
  return finish(dispatch1(Op::randn, std::span<const Tensor>{}, Attrs{sizes.vec(), opts.dtype_}),
                opts);
}

Tensor randint(int64_t low, int64_t high, IntList sizes, TensorOptions opts) {
  const FactoryDevice where = check_device(opts, "randint");
  return finish(
      dispatch1(Op::randint, std::span<const Tensor>{}, Attrs{low, high, sizes.vec(), opts.dtype_}),
      opts);
}

// *_like: t's sizes, dtype and device.
namespace {
TensorOptions like(const Tensor& t) { return TensorOptions(t.dtype()).device(t.device()); }
} // namespace
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), like(t)); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), like(t)); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), like(t)); }
Tensor full_like(const Tensor& t, Scalar value) { return full(t.sizes(), value, like(t)); }
Tensor rand_like(const Tensor& t) { return rand(t.sizes(), like(t)); }
Tensor randn_like(const Tensor& t) { return randn(t.sizes(), like(t)); }

template <typename T> Tensor tensor(const std::vector<T>& values, IntList shape) {
  Shape sizes = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape.vec();
  int64_t n = checked_numel(sizes, "tensor");
  KILN_CHECK(n == static_cast<int64_t>(values.size()), "tensor: ", values.size(),
             " values don't fill shape ", shape_str(sizes), " (", n, " elements)");
  Tensor out = make_tensor(sizes, dtype_of_v<T>);
  if (values.empty()) return out;
  TracerScope untraced(nullptr);           // filling a fresh tensor is no host read of traced data
  if constexpr (std::is_same_v<T, bool>) { // std::vector<bool> packs bits
    auto* p = static_cast<bool*>(out.raw_data());
    for (size_t i = 0; i < values.size(); ++i)
      p[i] = values[i];
  } else {
    std::memcpy(out.raw_data(), values.data(), values.size() * sizeof(T));
  }
  return out;
}

#define KILN_INSTANTIATE(T) template Tensor tensor<T>(const std::vector<T>&, IntList);
KILN_FOR_EACH_ELEMENT_TYPE(KILN_INSTANTIATE)
#undef KILN_INSTANTIATE

Tensor scalar_tensor(Scalar v, std::optional<DType> dtype) {
  return full({}, v, TensorOptions(dtype.value_or(v.default_dtype())));
}

} // namespace kiln
