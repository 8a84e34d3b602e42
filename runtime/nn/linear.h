// nn::Linear (y = x W^T + b) and nn::Identity.
#pragma once

#include "runtime/nn/module.h"

namespace kiln::nn {

/// y = x @ weight^T + bias; weight [out_features, in_features], bias [out_features].
/// Initialised as PyTorch: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t in_features;
  int64_t out_features;
  Tensor weight;
  Tensor bias; // undefined without bias
};

/// Returns its input.
class Identity : public Module {
public:
  Tensor forward(const Tensor& x) override { return x; }
};

} // namespace kiln::nn
