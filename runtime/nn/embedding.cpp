// nn::Embedding: the table parameter and the lookup.
#include "runtime/nn/embedding.h"

#include "runtime/nn/init.h"
#include "runtime/ops.h"

namespace kiln::nn {

Embedding::Embedding(int64_t num, int64_t dim) : num_embeddings(num), embedding_dim(dim) {
  KILN_CHECK(num >= 0 && dim >= 0,
             "Embedding: num_embeddings and embedding_dim must be "
             "non-negative, got ",
             num, " and ", dim);
  weight = randn({num, dim});
  register_parameter("weight", weight);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices); }

std::string Embedding::extra_repr() const {
  return detail::str(num_embeddings, ", ", embedding_dim);
}

} // namespace kiln::nn
