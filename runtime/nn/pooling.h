// nn::MaxPool2d and nn::AvgPool2d: 2-d pooling over NCHW input.
#pragma once

#include <optional>

#include "runtime/nn/module.h"
#include "runtime/nn/size2.h"

namespace kiln::nn {

/// Max over kernel windows; stride defaults to the kernel size.
class MaxPool2d : public Module {
public:
  MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
            Size2 dilation = 1, bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Size2 kernel_size;
  Size2 stride;
  Size2 padding;
  Size2 dilation;
  bool ceil_mode;
};

/// Mean over kernel windows; stride defaults to the kernel size.
class AvgPool2d : public Module {
public:
  AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
            bool ceil_mode = false, bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Size2 kernel_size;
  Size2 stride;
  Size2 padding;
  bool ceil_mode;
  bool count_include_pad;
};

} // namespace kiln::nn
