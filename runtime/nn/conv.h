// nn::Conv2d: 2-d convolution over NCHW input with OIHW weights.
#pragma once

#include "runtime/nn/module.h"
#include "runtime/nn/size2.h"

namespace kiln::nn {

/// weight [out_channels, in_channels / groups, kh, kw], bias [out_channels]; zero padding.
/// Initialised as PyTorch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups * kh * kw.
class Conv2d : public Module {
public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1,
         Size2 padding = 0, Size2 dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t in_channels;
  int64_t out_channels;
  Size2 kernel_size;
  Size2 stride;
  Size2 padding;
  Size2 dilation;
  int64_t groups;
  Tensor weight;
  Tensor bias; // undefined without bias
};

} // namespace kiln::nn
