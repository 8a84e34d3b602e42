// Shape and dtype inference for the contractions: matmul, conv2d, max_pool2d, avg_pool2d.
#include <string>

#include "runtime/ops/op.h"

namespace kiln::ops {

namespace {

std::string pair_str(const std::vector<int64_t>& v) {
  return detail::str("(", v[0], ", ", v[1], ")");
}

void check_pair(const std::vector<int64_t>& v, const char* op, const char* what, int64_t min) {
  KILN_CHECK(v.size() == 2, op, ": ", what, " must have 2 values, got ", v.size());
  KILN_CHECK(v[0] >= min && v[1] >= min, op, ": ", what, " must be ",
             min == 0 ? "non-negative" : "positive", ", got ", pair_str(v));
}

/// Floor division for a possibly negative numerator (PyTorch's div_rtn).
int64_t div_floor(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/// PyTorch's pooling_output_shape: with ceil_mode the last window must still start inside
/// the input or its left padding.
int64_t pool_output_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t out = div_floor(in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

std::vector<TensorMeta> infer_pool(const char* op, std::span<const TensorMeta> in,
                                   const std::vector<int64_t>& kernel,
                                   const std::vector<int64_t>& stride,
                                   const std::vector<int64_t>& padding,
                                   const std::vector<int64_t>& dilation, bool ceil_mode) {
  const TensorMeta& x = in[0];
  const size_t r = x.sizes.size();
  KILN_CHECK(
      (r == 3 || r == 4) && x.sizes[r - 1] != 0 && x.sizes[r - 2] != 0 && x.sizes[r - 3] != 0, op,
      ": expected a 3-d (C, H, W) or 4-d (N, C, H, W) input with non-zero C, H and W, got ",
      shape_str(x.sizes));
  KILN_CHECK(x.dtype != DType::bool_, op, ": bool input is not supported");
  check_pair(kernel, op, "kernel_size", 1);
  check_pair(stride, op, "stride", 1);
  check_pair(padding, op, "padding", 0);
  check_pair(dilation, op, "dilation", 1);
  KILN_CHECK(padding[0] <= kernel[0] / 2 && padding[1] <= kernel[1] / 2, op, ": padding ",
             pair_str(padding), " should be at most half of kernel size ", pair_str(kernel));
  Shape out = x.sizes;
  for (size_t i = 0; i < 2; ++i)
    out[r - 2 + i] = pool_output_size(x.sizes[r - 2 + i], kernel[i], stride[i], padding[i],
                                      dilation[i], ceil_mode);
  KILN_CHECK(out[r - 2] >= 1 && out[r - 1] >= 1, op, ": input ", shape_str(x.sizes),
             " gives output ", shape_str(out), ", which is too small");
  return {TensorMeta{x.dtype, x.device, out, {}, false}};
}

} // namespace

std::vector<TensorMeta> infer_matmul(std::span<const TensorMeta> in, const Attrs&) {
  const TensorMeta& a = in[0];
  const TensorMeta& b = in[1];
  KILN_CHECK(a.sizes.size() >= 2 && b.sizes.size() >= 2,
             "matmul: expected operands with at least 2 dims, got ", shape_str(a.sizes), " and ",
             shape_str(b.sizes));
  KILN_CHECK(a.dtype == b.dtype, "matmul: expected both operands to have the same dtype, got ",
             a.dtype, " and ", b.dtype);
  KILN_CHECK(a.dtype != DType::bool_, "matmul: bool operands are not supported");
  const int64_t k = a.sizes.back();
  const int64_t kb = b.sizes[b.sizes.size() - 2];
  KILN_CHECK(k == kb, "matmul: shapes ", shape_str(a.sizes), " and ", shape_str(b.sizes),
             " cannot be multiplied (", k, " != ", kb, ")");
  // Batch dims broadcast right-aligned (numpy rules).
  const size_t ra = a.sizes.size() - 2, rb = b.sizes.size() - 2, r = std::max(ra, rb);
  Shape out(r + 2);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i + ra >= r ? a.sizes[i + ra - r] : 1;
    const int64_t db = i + rb >= r ? b.sizes[i + rb - r] : 1;
    KILN_CHECK(da == db || da == 1 || db == 1, "matmul: batch dims of ", shape_str(a.sizes),
               " and ", shape_str(b.sizes), " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  out[r] = a.sizes[ra];
  out[r + 1] = b.sizes.back();
  return {TensorMeta{a.dtype, a.device, out, {}, false}};
}

std::vector<TensorMeta> infer_conv2d(std::span<const TensorMeta> in, const Attrs& attrs) {
  KILN_CHECK(in.size() == 2 || in.size() == 3,
             "conv2d: expected (input, weight) or (input, weight, bias), got ", in.size(),
             " tensors");
  const TensorMeta& x = in[0];
  const TensorMeta& w = in[1];
  const std::vector<int64_t>& stride = attrs.ints(0);
  const std::vector<int64_t>& padding = attrs.ints(1);
  const std::vector<int64_t>& dilation = attrs.ints(2);
  const int64_t groups = attrs.i(3);
  KILN_CHECK(x.sizes.size() == 4, "conv2d: expected a 4-d input (N, C, H, W), got ",
             shape_str(x.sizes));
  KILN_CHECK(w.sizes.size() == 4,
             "conv2d: expected a 4-d weight (out_channels, in_channels/groups, kH, kW), got ",
             shape_str(w.sizes));
  KILN_CHECK(w.sizes[2] >= 1 && w.sizes[3] >= 1, "conv2d: weight ", shape_str(w.sizes),
             " has an empty kernel");
  check_pair(stride, "conv2d", "stride", 1);
  check_pair(padding, "conv2d", "padding", 0);
  check_pair(dilation, "conv2d", "dilation", 1);
  KILN_CHECK(groups >= 1, "conv2d: groups must be positive, got ", groups);
  KILN_CHECK(is_floating(x.dtype), "conv2d: expected a floating input, got ", x.dtype);
  for (size_t i = 1; i < in.size(); ++i)
    KILN_CHECK(in[i].dtype == x.dtype, "conv2d: input and ", i == 1 ? "weight" : "bias",
               " must have the same dtype, got ", x.dtype, " and ", in[i].dtype);
  const int64_t out_channels = w.sizes[0];
  KILN_CHECK(out_channels % groups == 0, "conv2d: out_channels (", out_channels,
             ") must be divisible by groups (", groups, ")");
  KILN_CHECK(x.sizes[1] == w.sizes[1] * groups, "conv2d: weight ", shape_str(w.sizes),
             " with groups = ", groups, " expects input with ", w.sizes[1] * groups,
             " channels (in_channels/groups = ", w.sizes[1], "), but input ", shape_str(x.sizes),
             " has ", x.sizes[1]);
  if (in.size() == 3)
    KILN_CHECK(in[2].sizes.size() == 1 && in[2].sizes[0] == out_channels,
               "conv2d: bias must be 1-d with ", out_channels, " elements (out_channels), got ",
               shape_str(in[2].sizes));
  Shape out{x.sizes[0], out_channels, 0, 0};
  for (size_t i = 0; i < 2; ++i) {
    const int64_t padded = x.sizes[2 + i] + 2 * padding[i];
    const int64_t extent = dilation[i] * (w.sizes[2 + i] - 1) + 1;
    KILN_CHECK(extent <= padded, "conv2d: kernel size ", pair_str({w.sizes[2], w.sizes[3]}),
               " (dilated extent ", extent, ") can't be greater than the padded input size ",
               pair_str({x.sizes[2] + 2 * padding[0], x.sizes[3] + 2 * padding[1]}), " of input ",
               shape_str(x.sizes));
    out[2 + i] = (padded - extent) / stride[i] + 1;
  }
  return {TensorMeta{x.dtype, x.device, out, {}, false}};
}

std::vector<TensorMeta> infer_max_pool2d(std::span<const TensorMeta> in, const Attrs& a) {
  return infer_pool("max_pool2d", in, a.ints(0), a.ints(1), a.ints(2), a.ints(3), a.b(4));
}

std::vector<TensorMeta> infer_avg_pool2d(std::span<const TensorMeta> in, const Attrs& a) {
  return infer_pool("avg_pool2d", in, a.ints(0), a.ints(1), a.ints(2), {1, 1}, a.b(3));
}

} // namespace kiln::ops
