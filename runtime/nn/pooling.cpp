// nn::MaxPool2d and nn::AvgPool2d: hold the window arguments and call the pooling ops.
#include "runtime/nn/pooling.h"

#include "runtime/ops.h"

namespace kiln::nn {
namespace {

std::string pair_str(const Size2& v) {
  return v.h == v.w ? std::to_string(v.h) : detail::str("(", v.h, ", ", v.w, ")");
}

} // namespace

MaxPool2d::MaxPool2d(Size2 k, std::optional<Size2> s, Size2 p, Size2 d, bool ceil)
    : kernel_size(k), stride(s.value_or(k)), padding(p), dilation(d), ceil_mode(ceil) {}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, kernel_size.vec(), stride.vec(), padding.vec(), dilation.vec(), ceil_mode);
}

std::string MaxPool2d::extra_repr() const {
  return detail::str("kernel_size=", pair_str(kernel_size), ", stride=", pair_str(stride),
                     ", padding=", pair_str(padding), ", dilation=", pair_str(dilation),
                     ", ceil_mode=", ceil_mode ? "True" : "False");
}

AvgPool2d::AvgPool2d(Size2 k, std::optional<Size2> s, Size2 p, bool ceil, bool include_pad)
    : kernel_size(k), stride(s.value_or(k)), padding(p), ceil_mode(ceil),
      count_include_pad(include_pad) {}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size.vec(), stride.vec(), padding.vec(), ceil_mode,
                    count_include_pad);
}

std::string AvgPool2d::extra_repr() const {
  return detail::str("kernel_size=", pair_str(kernel_size), ", stride=", pair_str(stride),
                     ", padding=", pair_str(padding));
}

} // namespace kiln::nn
