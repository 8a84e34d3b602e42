// nn::BatchNorm1d/2d and nn::LayerNorm: parameters, running statistics and forward passes.
#include "runtime/nn/norm.h"

#include "runtime/ops.h"

namespace kiln::nn {

BatchNorm::BatchNorm(int64_t n, double eps_, double momentum_, bool affine_)
    : num_features(n), eps(eps_), momentum(momentum_), affine(affine_) {
  KILN_CHECK(n >= 0, "BatchNorm: num_features must be non-negative, got ", n);
  if (affine) {
    weight = ones({n});
    bias = zeros({n});
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
  running_mean = zeros({n});
  running_var = ones({n});
  num_batches_tracked = zeros({}, DType::i64);
  register_buffer("running_mean", running_mean);
  register_buffer("running_var", running_var);
  register_buffer("num_batches_tracked", num_batches_tracked);
}

Tensor BatchNorm::forward(const Tensor& x) {
  check_input(x);
  KILN_CHECK(x.size(1) == num_features, name(), ": expected ", num_features,
             " channels in dim 1 of the input, got shape ", shape_str(x.sizes()));
  if (is_training()) num_batches_tracked.add_(1);
  return batch_norm(x, running_mean, running_var, weight, bias, is_training(), momentum, eps);
}

std::string BatchNorm::extra_repr() const {
  return detail::str(num_features, ", eps=", eps, ", momentum=", momentum,
                     ", affine=", affine ? "True" : "False", ", track_running_stats=True");
}

void BatchNorm1d::check_input(const Tensor& x) const {
  KILN_CHECK(x.dim() == 2 || x.dim() == 3, "BatchNorm1d: expected 2D or 3D input (got ", x.dim(),
             "D input of shape ", shape_str(x.sizes()), ")");
}

void BatchNorm2d::check_input(const Tensor& x) const {
  KILN_CHECK(x.dim() == 4, "BatchNorm2d: expected 4D input (got ", x.dim(), "D input of shape ",
             shape_str(x.sizes()), ")");
}

LayerNorm::LayerNorm(std::vector<int64_t> shape, double eps_, bool affine, bool with_bias)
    : normalized_shape(std::move(shape)), eps(eps_), elementwise_affine(affine) {
  for (int64_t d : normalized_shape)
    KILN_CHECK(d >= 0, "LayerNorm: normalized_shape must be non-negative, got ",
               shape_str(normalized_shape));
  if (affine) {
    weight = ones(normalized_shape);
    register_parameter("weight", weight);
    if (with_bias) {
      bias = zeros(normalized_shape);
      register_parameter("bias", bias);
    }
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  std::string shape = "(";
  for (size_t i = 0; i < normalized_shape.size(); ++i) {
    if (i) shape += ", ";
    shape += std::to_string(normalized_shape[i]);
  }
  shape += normalized_shape.size() == 1 ? ",)" : ")";
  return detail::str(shape, ", eps=", eps,
                     ", elementwise_affine=", elementwise_affine ? "True" : "False");
}

} // namespace kiln::nn
