// nn::Flatten: its repr (the forward pass is inline).
#include "runtime/nn/flatten.h"

namespace kiln::nn {

std::string Flatten::extra_repr() const {
  return detail::str("start_dim=", start_dim, ", end_dim=", end_dim);
}

} // namespace kiln::nn
