// nn::Embedding: a lookup table of num_embeddings vectors of size embedding_dim.
#pragma once

#include "runtime/nn/module.h"

namespace kiln::nn {

/// weight [num_embeddings, embedding_dim] ~ N(0, 1); forward(indices) gathers rows, giving
/// indices.shape + [embedding_dim].
class Embedding : public Module {
public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;

  int64_t num_embeddings;
  int64_t embedding_dim;
  Tensor weight;
};

} // namespace kiln::nn
