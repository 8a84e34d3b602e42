// Inference of the reduction primitives: sum, prod, amax, amin, argmax, argmin, cumsum.
#include <algorithm>
#include <vector>

#include "runtime/error.h"
#include "runtime/ops/op.h"
#include "runtime/ops/reduce_dims.h"

namespace kiln {

std::vector<bool> reduced_dims_mask(IntList dims, int64_t rank, const char* op) {
  std::vector<bool> mask(static_cast<size_t>(rank), dims.empty());
  // A 0-d tensor accepts dim 0 / -1 (it reduces nothing), so track repeats separately.
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 1)), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, rank, op);
    KILN_CHECK(!seen[static_cast<size_t>(w)], op, ": dim ", d,
               " appears more than once in the list of dims ", shape_str(dims));
    seen[static_cast<size_t>(w)] = true;
    if (rank > 0) mask[static_cast<size_t>(w)] = true;
  }
  return mask;
}

Shape reduced_shape(IntList sizes, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!mask[d])
      out.push_back(sizes[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

namespace ops {
namespace {

std::vector<TensorMeta> infer_accumulating(std::span<const TensorMeta> in, const Attrs& a,
                                           const char* op) {
  const TensorMeta& x = in[0];
  auto mask = reduced_dims_mask(a.ints(0), static_cast<int64_t>(x.sizes.size()), op);
  return {TensorMeta::dense(x, reduced_shape(x.sizes, mask, a.b(1)), a.dtype(2))};
}

/// amax/amin have no value over an empty range (PyTorch raises too).
std::vector<TensorMeta> infer_extremum(std::span<const TensorMeta> in, const Attrs& a,
                                       const char* op) {
  const TensorMeta& x = in[0];
  auto mask = reduced_dims_mask(a.ints(0), static_cast<int64_t>(x.sizes.size()), op);
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    KILN_CHECK(!mask[d] || x.sizes[d] != 0, op, ": cannot reduce over an empty dimension (dim ", d,
               " of shape ", shape_str(x.sizes), ")");
  }
  return {TensorMeta::dense(x, reduced_shape(x.sizes, mask, a.b(1)), x.dtype)};
}

std::vector<TensorMeta> infer_arg_extremum(std::span<const TensorMeta> in, const Attrs& a,
                                           const char* op) {
  const TensorMeta& x = in[0];
  const int64_t rank = static_cast<int64_t>(x.sizes.size());
  int64_t d = wrap_dim(a.i(0), rank, op);
  KILN_CHECK(rank == 0 || x.sizes[d] != 0, op, ": cannot reduce over an empty dimension (dim ",
             a.i(0), " of shape ", shape_str(x.sizes), ")");
  std::vector<bool> mask(static_cast<size_t>(rank), false);
  if (rank > 0) mask[d] = true;
  return {TensorMeta::dense(x, reduced_shape(x.sizes, mask, a.b(1)), DType::i64)};
}

} // namespace

std::vector<TensorMeta> infer_sum(std::span<const TensorMeta> in, const Attrs& a) {
  return infer_accumulating(in, a, "sum");
}
std::vector<TensorMeta> infer_prod(std::span<const TensorMeta> in, const Attrs& a) {
  return infer_accumulating(in, a, "prod");
}
std::vector<TensorMeta> infer_amax(std::span<const TensorMeta> in, const Attrs& a) {
  return infer_extremum(in, a, "amax");
}
std::vector<TensorMeta> infer_amin(std::span<const TensorMeta> in, const Attrs& a) {
  return infer_extremum(in, a, "amin");
}
std::vector<TensorMeta> infer_argmax(std::span<const TensorMeta> in, const Attrs& a) {
  return infer_arg_extremum(in, a, "argmax");
}
std::vector<TensorMeta> infer_argmin(std::span<const TensorMeta> in, const Attrs& a) {
  return infer_arg_extremum(in, a, "argmin");
}

std::vector<TensorMeta> infer_cumsum(std::span<const TensorMeta> in, const Attrs& a) {
  const TensorMeta& x = in[0];
  wrap_dim(a.i(0), static_cast<int64_t>(x.sizes.size()), "cumsum");
  return {TensorMeta::dense(x, x.sizes, a.dtype(1))};
}

} // namespace ops
} // namespace kiln
