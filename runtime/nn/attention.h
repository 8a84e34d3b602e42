// nn::MultiheadAttention: PyTorch's multi-head attention with packed q/k/v projections.
#pragma once

#include "runtime/nn/linear.h"
#include "runtime/nn/module.h"

namespace kiln::nn {

/// Attention over batch-first inputs (PyTorch's batch_first=True): query [N, L, E], key and
/// value [N, S, E], or unbatched [L, E] / [S, E]. Parameters have PyTorch's names:
/// in_proj_weight [3E, E] (q, k, v rows stacked; Xavier-uniform), in_proj_bias [3E] (zeros),
/// out_proj.weight [E, E], out_proj.bias [E] (zeros).
class MultiheadAttention : public Module {
public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias = true, double dropout = 0.0);
  /// Rejects MultiheadAttention(E, H, 0.1): the third argument is bias, not dropout.
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout) = delete;

  /// The attention output [N, L, E]. attn_mask is [L, S] or [N * num_heads, L, S]: a bool mask
  /// where true means "may not attend" (PyTorch's convention for this module), or a float mask
  /// added to the scores. key_padding_mask [N, S] (bool, true = padding, or float, added)
  /// masks keys per batch element. is_causal additionally masks the future (j > i).
  /// Attention dropout applies in training mode.
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& attn_mask = {}, bool is_causal = false,
                 const Tensor& key_padding_mask = {});
  /// Self-attention: forward(x, x, x).
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }
  using Module::operator();
  Tensor operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                    const Tensor& attn_mask = {}, bool is_causal = false,
                    const Tensor& key_padding_mask = {}) {
    return forward(query, key, value, attn_mask, is_causal, key_padding_mask);
  }

  int64_t embed_dim;
  int64_t num_heads;
  int64_t head_dim;
  double dropout;
  Tensor in_proj_weight;
  Tensor in_proj_bias; // undefined without bias
  Linear out_proj;
};

} // namespace kiln::nn
