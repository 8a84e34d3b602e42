// nn::BatchNorm1d, nn::BatchNorm2d and nn::LayerNorm.
#pragma once

#include <vector>

#include "runtime/nn/module.h"

namespace kiln::nn {

/// Batch normalisation over the channel dim (dim 1). Parameters weight (ones) and bias (zeros)
/// when affine; buffers running_mean (zeros), running_var (ones) and num_batches_tracked (an
/// i64 0-d counter). Training normalises with batch statistics and updates the running ones
/// (running = (1 - momentum) * running + momentum * batch, unbiased variance); eval uses the
/// running statistics.
class BatchNorm : public Module {
public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t num_features;
  double eps;
  double momentum;
  bool affine;
  Tensor weight; // undefined unless affine
  Tensor bias;   // undefined unless affine
  Tensor running_mean;
  Tensor running_var;
  Tensor num_batches_tracked;

protected:
  BatchNorm(int64_t num_features, double eps, double momentum, bool affine);
  /// Throws unless x has a rank this layer accepts.
  virtual void check_input(const Tensor& x) const = 0;
};

/// BatchNorm over [N, C] or [N, C, L] input.
class BatchNorm1d : public BatchNorm {
public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                       bool affine = true)
      : BatchNorm(num_features, eps, momentum, affine) {}

protected:
  void check_input(const Tensor& x) const override;
};

/// BatchNorm over [N, C, H, W] input.
class BatchNorm2d : public BatchNorm {
public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                       bool affine = true)
      : BatchNorm(num_features, eps, momentum, affine) {}

protected:
  void check_input(const Tensor& x) const override;
};

/// Normalises over the trailing dims given by normalized_shape; with elementwise_affine,
/// weight (ones) and bias (zeros) of that shape. nn::LayerNorm ln{std::vector<int64_t>{768}}.
class LayerNorm : public Module {
public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5,
                     bool elementwise_affine = true, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::vector<int64_t> normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight; // undefined without elementwise_affine
  Tensor bias;   // undefined without elementwise_affine or bias
};

} // namespace kiln::nn
