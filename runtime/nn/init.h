// nn::init: the weight initialisers of torch.nn.init, drawing from the global Philox stream.
#pragma once

#include <cstdint>

#include "runtime/tensor.h"

namespace kiln::nn::init {

/// Fills t in place with U(lo, hi): lo + rand * (hi - lo).
Tensor& uniform_(Tensor& t, double lo, double hi);
/// Fills t in place with N(mean, std^2).
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
/// Fills t in place with U(-b, b), b = gain * sqrt(3 / fan_in) and gain = sqrt(2 / (1 + a^2))
/// (leaky-relu gain). PyTorch's Linear and Conv2d use a = sqrt(5), that is b = 1/sqrt(fan_in).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0);
/// Fills t in place with U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);
/// fan_in of a weight: size(1) times the receptive field (the product of dims after the
/// first two). Needs at least 2 dims.
int64_t fan_in(const Tensor& weight);
/// fan_out of a weight: size(0) times the receptive field.
int64_t fan_out(const Tensor& weight);

} // namespace kiln::nn::init
