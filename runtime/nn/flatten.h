// nn::Flatten: merges dims start_dim..end_dim into one.
#pragma once

#include "runtime/nn/module.h"

namespace kiln::nn {

/// x.flatten(start_dim, end_dim); the defaults keep the batch dim.
class Flatten : public Module {
public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_dim, end_dim); }
  std::string extra_repr() const override;

  int64_t start_dim;
  int64_t end_dim;
};

} // namespace kiln::nn
