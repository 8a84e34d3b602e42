// Activation modules: ReLU, GELU, SiLU, Tanh, Sigmoid, Softmax.
#pragma once

#include "runtime/nn/module.h"

namespace kiln::nn {

class ReLU : public Module {
public:
  Tensor forward(const Tensor& x) override;
};

/// GELU; approximate = "none" (erf) or "tanh".
class GELU : public Module {
public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::string approximate;
};

/// x * sigmoid(x).
class SiLU : public Module {
public:
  Tensor forward(const Tensor& x) override;
};

class Tanh : public Module {
public:
  Tensor forward(const Tensor& x) override;
};

class Sigmoid : public Module {
public:
  Tensor forward(const Tensor& x) override;
};

/// softmax over one dim.
class Softmax : public Module {
public:
  explicit Softmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t dim;
};

} // namespace kiln::nn
