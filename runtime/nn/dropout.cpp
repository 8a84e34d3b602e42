// nn::Dropout: the probability check and the forward pass.
#include "runtime/nn/dropout.h"

#include "runtime/ops.h"

namespace kiln::nn {

Dropout::Dropout(double p_) : p(p_) {
  KILN_CHECK(p >= 0.0 && p <= 1.0, "Dropout: probability has to be between 0 and 1, but got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training()); }

std::string Dropout::extra_repr() const { return detail::str("p=", p); }

} // namespace kiln::nn
