// nn::Linear: parameters, PyTorch's default initialisation and the forward pass.
#include "runtime/nn/linear.h"

#include <cmath>

#include "runtime/nn/init.h"
#include "runtime/ops.h"

namespace kiln::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  KILN_CHECK(in >= 0 && out >= 0,
             "Linear: in_features and out_features must be non-negative, "
             "got ",
             in, " and ", out);
  weight = empty({out, in});
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  register_parameter("weight", weight);
  if (with_bias) {
    bias = empty({out});
    double bound = in > 0 ? 1.0 / std::sqrt(static_cast<double>(in)) : 0.0;
    init::uniform_(bias, -bound, bound);
    register_parameter("bias", bias);
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return detail::str("in_features=", in_features, ", out_features=", out_features,
                     ", bias=", bias.defined() ? "True" : "False");
}

} // namespace kiln::nn
