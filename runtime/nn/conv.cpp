// nn::Conv2d: argument checks, PyTorch's default initialisation and the forward pass.
#include "runtime/nn/conv.h"

#include <cmath>

#include "runtime/nn/init.h"
#include "runtime/ops.h"

namespace kiln::nn {

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Size2 s, Size2 p, Size2 d, int64_t g,
               bool with_bias)
    : in_channels(in), out_channels(out), kernel_size(k), stride(s), padding(p), dilation(d),
      groups(g) {
  KILN_CHECK(g > 0, "Conv2d: groups must be a positive integer, got ", g);
  KILN_CHECK(in >= 0 && out >= 0,
             "Conv2d: channel counts must be non-negative, got in_channels=", in,
             " and out_channels=", out);
  KILN_CHECK(in % g == 0, "Conv2d: in_channels (", in, ") must be divisible by groups (", g, ")");
  KILN_CHECK(out % g == 0, "Conv2d: out_channels (", out, ") must be divisible by groups (", g,
             ")");
  KILN_CHECK(k.h > 0 && k.w > 0, "Conv2d: kernel_size must be positive, got (", k.h, ", ", k.w,
             ")");
  KILN_CHECK(s.h > 0 && s.w > 0, "Conv2d: stride must be positive, got (", s.h, ", ", s.w, ")");
  KILN_CHECK(p.h >= 0 && p.w >= 0, "Conv2d: padding must be non-negative, got (", p.h, ", ", p.w,
             ")");
  KILN_CHECK(d.h > 0 && d.w > 0, "Conv2d: dilation must be positive, got (", d.h, ", ", d.w, ")");
  weight = empty({out, in / g, k.h, k.w});
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  register_parameter("weight", weight);
  if (with_bias) {
    bias = empty({out});
    int64_t fan = init::fan_in(weight);
    double bound = fan > 0 ? 1.0 / std::sqrt(static_cast<double>(fan)) : 0.0;
    init::uniform_(bias, -bound, bound);
    register_parameter("bias", bias);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight, bias, stride.vec(), padding.vec(), dilation.vec(), groups);
}

std::string Conv2d::extra_repr() const {
  auto pair = [](const Size2& v) { return detail::str("(", v.h, ", ", v.w, ")"); };
  std::string s = detail::str(in_channels, ", ", out_channels, ", kernel_size=", pair(kernel_size),
                              ", stride=", pair(stride));
  if (padding != Size2(0)) s += ", padding=" + pair(padding);
  if (dilation != Size2(1)) s += ", dilation=" + pair(dilation);
  if (groups != 1) s += detail::str(", groups=", groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

} // namespace kiln::nn
