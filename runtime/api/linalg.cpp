// The public linear-algebra, convolution and pooling ops: matmul, bmm, linear, conv2d,
// max_pool2d, avg_pool2d and adaptive_avg_pool2d (torch.nn.functional semantics).
#include <string>
#include <vector>

#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"

namespace kiln {

namespace {

/// A PyTorch "int or pair" argument: one value stands for both spatial dims.
std::vector<int64_t> as_pair(const std::vector<int64_t>& v, const char* op, const char* what) {
  KILN_CHECK(v.size() == 1 || v.size() == 2, op, ": ", what, " must be one int or a pair, got ",
             v.size(), " values");
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

/// Runs a 4-d (NCHW) op on a 3-d (CHW) input by adding and then dropping a batch dim.
template <typename F> Tensor unbatched(const Tensor& x, F&& f) {
  if (x.dim() == 3) return squeeze(f(unsqueeze(x, 0)), 0);
  return f(x);
}

} // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dim, got ",
             shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  if (a.dim() >= 2 && b.dim() >= 2) return dispatch1(Op::matmul, {a, b});
  // 1-d operands: check with the user's shapes, then promote to matrices as torch.matmul does.
  int64_t ka = a.size(-1);
  int64_t kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  KILN_CHECK(ka == kb, "matmul: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
             " cannot be multiplied (", ka, " != ", kb, ")");
  if (a.dim() == 1 && b.dim() == 1)
    return reshape(dispatch1(Op::matmul, {unsqueeze(a, 0), unsqueeze(b, 1)}), {});
  if (a.dim() == 1) return squeeze(dispatch1(Op::matmul, {unsqueeze(a, 0), b}), -2);
  return squeeze(dispatch1(Op::matmul, {a, unsqueeze(b, 1)}), -1);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-d tensors, got ", shape_str(a.sizes()),
             " and ", shape_str(b.sizes()));
  KILN_CHECK(a.size(0) == b.size(0), "bmm: batch sizes differ: ", shape_str(a.sizes()), " and ",
             shape_str(b.sizes()));
  return dispatch1(Op::matmul, {a, b});
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  KILN_CHECK(weight.dim() == 1 || weight.dim() == 2, "linear: weight must be 1-d or 2-d, got ",
             shape_str(weight.sizes()));
  Tensor y = matmul(x, weight.dim() == 2 ? transpose(weight, 0, 1) : weight);
  return bias.defined() ? add(y, bias) : y;
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              std::vector<int64_t> stride, std::vector<int64_t> padding,
              std::vector<int64_t> dilation, int64_t groups) {
  Attrs attrs{as_pair(stride, "conv2d", "stride"), as_pair(padding, "conv2d", "padding"),
              as_pair(dilation, "conv2d", "dilation"), groups};
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, "conv2d: expected a 3-d (unbatched) or 4-d input, got ",
             shape_str(x.sizes()));
  return unbatched(x, [&](const Tensor& x4) {
    if (bias.defined()) return dispatch1(Op::conv2d, {x4, weight, bias}, attrs);
    return dispatch1(Op::conv2d, {x4, weight}, attrs);
  });
}

Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode) {
  kernel = as_pair(kernel, "max_pool2d", "kernel_size");
  stride = stride.empty() ? kernel : as_pair(stride, "max_pool2d", "stride");
  return dispatch1(Op::max_pool2d, {x},
                   Attrs{kernel, stride, as_pair(padding, "max_pool2d", "padding"),
                         as_pair(dilation, "max_pool2d", "dilation"), ceil_mode});
}

Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, bool ceil_mode, bool count_include_pad) {
  kernel = as_pair(kernel, "avg_pool2d", "kernel_size");
  stride = stride.empty() ? kernel : as_pair(stride, "avg_pool2d", "stride");
  return dispatch1(Op::avg_pool2d, {x},
                   Attrs{kernel, stride, as_pair(padding, "avg_pool2d", "padding"), ceil_mode,
                         count_include_pad});
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size) {
  output_size = as_pair(output_size, "adaptive_avg_pool2d", "output_size");
  KILN_CHECK(x.dim() == 3 || x.dim() == 4,
             "adaptive_avg_pool2d: expected a 3-d (unbatched) or 4-d input, got ",
             shape_str(x.sizes()));
  const int64_t oh = output_size[0], ow = output_size[1];
  const int64_t h = x.size(-2), w = x.size(-1);
  KILN_CHECK(oh >= 1 && ow >= 1, "adaptive_avg_pool2d: output_size must be positive, got [", oh,
             ", ", ow, "]");
  if (oh == 1 && ow == 1) return mean(x, {-2, -1}, /*keepdim=*/true);
  // Equal windows (input divisible by output) are exactly avg_pool2d with kernel = stride.
  KILN_CHECK(h % oh == 0 && w % ow == 0, "adaptive_avg_pool2d: input ", shape_str(x.sizes()),
             " to output [", oh, ", ", ow,
             "] needs uneven windows, which is not supported yet (input size must be divisible "
             "by output size)");
  std::vector<int64_t> k{h / oh, w / ow};
  return avg_pool2d(x, k, k);
}

} // namespace kiln
