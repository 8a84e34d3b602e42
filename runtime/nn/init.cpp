// nn::init: uniform/normal fills and the Kaiming and Xavier bounds, as torch.nn.init.
#include "runtime/nn/init.h"

#include <cmath>

#include "runtime/ops.h"

namespace kiln::nn::init {
namespace {

int64_t receptive_field(const Tensor& w, const char* fn) {
  KILN_CHECK(w.dim() >= 2, fn,
             ": fan in and fan out cannot be computed for a tensor with fewer "
             "than 2 dims, got shape ",
             shape_str(w.sizes()));
  int64_t r = 1;
  for (int64_t d = 2; d < w.dim(); ++d)
    r *= w.size(d);
  return r;
}

} // namespace

int64_t fan_in(const Tensor& w) { return w.size(1) * receptive_field(w, "fan_in"); }
int64_t fan_out(const Tensor& w) { return w.size(0) * receptive_field(w, "fan_out"); }

Tensor& uniform_(Tensor& t, double lo, double hi) {
  Tensor u = rand(t.sizes(), TensorOptions(t.dtype()).device(t.device()));
  // Written through a detached view so the fill is not recorded for autograd.
  t.detach().copy_(u * (hi - lo) + lo);
  return t;
}

Tensor& normal_(Tensor& t, double mean, double std) {
  Tensor n = randn(t.sizes(), TensorOptions(t.dtype()).device(t.device()));
  t.detach().copy_(n * std + mean);
  return t;
}

Tensor& zeros_(Tensor& t) {
  t.detach().zero_();
  return t;
}

Tensor& ones_(Tensor& t) {
  t.detach().fill_(1);
  return t;
}

Tensor& kaiming_uniform_(Tensor& t, double a) {
  int64_t fan = fan_in(t);
  double gain = std::sqrt(2.0 / (1.0 + a * a));
  // An empty weight (fan_in 0) has nothing to fill; PyTorch warns and returns it.
  if (fan == 0) return t;
  double bound = gain * std::sqrt(3.0 / static_cast<double>(fan));
  return uniform_(t, -bound, bound);
}

Tensor& xavier_uniform_(Tensor& t, double gain) {
  int64_t fans = fan_in(t) + fan_out(t);
  if (fans == 0) return t;
  double bound = gain * std::sqrt(6.0 / static_cast<double>(fans));
  return uniform_(t, -bound, bound);
}

} // namespace kiln::nn::init
