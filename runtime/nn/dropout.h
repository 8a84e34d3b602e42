// nn::Dropout: zeroes elements with probability p in training and scales the rest by 1/(1-p).
#pragma once

#include "runtime/nn/module.h"

namespace kiln::nn {

/// Identity in eval mode; in training, dropout(x, p) from the global Philox stream.
class Dropout : public Module {
public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  double p;
};

} // namespace kiln::nn
