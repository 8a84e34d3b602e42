// Activation modules: each forwards to its op.
#include "runtime/nn/activation.h"

#include "runtime/ops.h"

namespace kiln::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

GELU::GELU(std::string approx) : approximate(std::move(approx)) {
  KILN_CHECK(approximate == "none" || approximate == "tanh",
             "GELU: approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }
std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

Tensor Softmax::forward(const Tensor& x) { return softmax(x, dim); }
std::string Softmax::extra_repr() const { return detail::str("dim=", dim); }

} // namespace kiln::nn
