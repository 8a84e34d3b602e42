// The public reductions: sum, mean, max/min, prod, var/std, argmax/argmin, cumsum and the
// softmax composites, each a dispatch of a reduction primitive or a composition of them.
#include <algorithm>
#include <vector>

#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/ops/reduce_dims.h"

namespace kiln {
namespace {

/// The dtype sum/prod/cumsum produce when none is given: i64 for integers and bool (PyTorch
/// accumulates them in int64), the input's dtype otherwise.
DType default_accumulate_dtype(DType t) { return is_floating(t) ? t : DType::i64; }

/// The number of elements each output of a reduction over `dims` combines (empty = all).
int64_t reduced_count(const Tensor& a, IntList dims, const char* op) {
  std::vector<bool> mask = reduced_dims_mask(dims, a.dim(), op);
  int64_t n = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (mask[static_cast<size_t>(d)]) n *= a.size(d);
  return n;
}

void check_floating(const Tensor& a, const char* op) {
  KILN_CHECK(is_floating(a.dtype()), op, ": expected a floating-point input, got ", a.dtype(),
             " (shape ", shape_str(a.sizes()), "); convert it with .to(DType::f32) first");
}

/// f16/bf16 composites compute in f32 and round once at the end, as PyTorch's kernels do.
DType compute_dtype(DType t) { return is_reduced_float(t) ? DType::f32 : t; }

/// max/min over an empty range has no value (PyTorch raises too).
void check_nonempty(const Tensor& a, IntList dims, const char* op) {
  std::vector<bool> mask = reduced_dims_mask(dims, a.dim(), op);
  for (int64_t d = 0; d < a.dim(); ++d) {
    KILN_CHECK(!mask[static_cast<size_t>(d)] || a.size(d) != 0, op,
               ": cannot reduce over an empty dimension (dim ", d, " of shape ",
               shape_str(a.sizes()), ")");
  }
}

} // namespace

Tensor sum(const Tensor& a, IntList dims, bool keepdim, std::optional<DType> dtype) {
  DType t = dtype.value_or(default_accumulate_dtype(a.dtype()));
  return dispatch1(Op::sum, {a}, Attrs{dims.vec(), keepdim, t});
}

Tensor mean(const Tensor& a, IntList dims, bool keepdim) {
  check_floating(a, "mean");
  int64_t n = reduced_count(a, dims, "mean");
  DType ct = compute_dtype(a.dtype());
  // An empty range gives 0 / 0 = NaN, as PyTorch.
  Tensor s = sum(a, dims, keepdim, ct);
  Tensor m = div(s, Scalar(static_cast<double>(n)));
  return ct == a.dtype() ? m : to(m, a.dtype());
}

Tensor amax(const Tensor& a, IntList dims, bool keepdim) {
  return dispatch1(Op::amax, {a}, Attrs{dims.vec(), keepdim});
}

Tensor amin(const Tensor& a, IntList dims, bool keepdim) {
  return dispatch1(Op::amin, {a}, Attrs{dims.vec(), keepdim});
}

Tensor max(const Tensor& a, IntList dims, bool keepdim) {
  check_nonempty(a, dims, "max");
  return amax(a, dims, keepdim);
}

Tensor min(const Tensor& a, IntList dims, bool keepdim) {
  check_nonempty(a, dims, "min");
  return amin(a, dims, keepdim);
}

Tensor prod(const Tensor& a, IntList dims, bool keepdim) {
  return dispatch1(Op::prod, {a}, Attrs{dims.vec(), keepdim, default_accumulate_dtype(a.dtype())});
}

Tensor var(const Tensor& a, IntList dims, bool keepdim, int64_t correction) {
  check_floating(a, "var");
  int64_t n = reduced_count(a, dims, "var");
  DType ct = compute_dtype(a.dtype());
  Tensor x = ct == a.dtype() ? a : to(a, ct);
  // Two passes: the mean first, then the squared deviations from it (stable where the
  // one-pass E[x^2] - E[x]^2 cancels catastrophically).
  Tensor m = mean(x, dims, /*keepdim=*/true);
  Tensor d = sub(x, m);
  Tensor ss = sum(mul(d, d), dims, keepdim);
  // PyTorch divides by max(0, n - correction): 0 / 0 = NaN, x / 0 = inf.
  double denom = static_cast<double>(std::max<int64_t>(0, n - correction));
  Tensor v = div(ss, Scalar(denom));
  return ct == a.dtype() ? v : to(v, a.dtype());
}

Tensor std(const Tensor& a, IntList dims, bool keepdim, int64_t correction) {
  check_floating(a, "std");
  DType ct = compute_dtype(a.dtype());
  Tensor x = ct == a.dtype() ? a : to(a, ct);
  Tensor s = sqrt(var(x, dims, keepdim, correction));
  return ct == a.dtype() ? s : to(s, a.dtype());
}

namespace {

Tensor arg_extremum(Op op, const char* name, const Tensor& a, std::optional<int64_t> dim,
                    bool keepdim) {
  if (dim) return dispatch1(op, {a}, Attrs{*dim, keepdim});
  // No dim: over the flattened tensor; keepdim keeps every dim as size 1 (PyTorch).
  KILN_CHECK(a.numel() != 0, name, ": cannot reduce over an empty tensor (shape ",
             shape_str(a.sizes()), ") without a dim");
  Tensor r = dispatch1(op, {reshape(a, {-1})}, Attrs{int64_t{0}, false});
  if (!keepdim) return r;
  return reshape(r, Shape(static_cast<size_t>(a.dim()), 1));
}

} // namespace

Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extremum(Op::argmax, "argmax", a, dim, keepdim);
}

Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extremum(Op::argmin, "argmin", a, dim, keepdim);
}

Tensor cumsum(const Tensor& a, int64_t dim, std::optional<DType> dtype) {
  DType t = dtype.value_or(default_accumulate_dtype(a.dtype()));
  return dispatch1(Op::cumsum, {a}, Attrs{dim, t});
}

Tensor softmax(const Tensor& a, int64_t dim) {
  check_floating(a, "softmax");
  wrap_dim(dim, a.dim(), "softmax");
  if (a.numel() == 0) return clone(a);
  DType ct = compute_dtype(a.dtype());
  Tensor x = ct == a.dtype() ? a : to(a, ct);
  // Subtracting the max keeps exp from overflowing; the result is unchanged mathematically.
  Tensor e = exp(sub(x, amax(x, {dim}, /*keepdim=*/true)));
  Tensor r = div(e, sum(e, {dim}, /*keepdim=*/true));
  return ct == a.dtype() ? r : to(r, a.dtype());
}

Tensor log_softmax(const Tensor& a, int64_t dim) {
  check_floating(a, "log_softmax");
  wrap_dim(dim, a.dim(), "log_softmax");
  if (a.numel() == 0) return clone(a);
  DType ct = compute_dtype(a.dtype());
  Tensor x = ct == a.dtype() ? a : to(a, ct);
  Tensor shifted = sub(x, amax(x, {dim}, /*keepdim=*/true));
  Tensor r = sub(shifted, log(sum(exp(shifted), {dim}, /*keepdim=*/true)));
  return ct == a.dtype() ? r : to(r, a.dtype());
}

} // namespace kiln
