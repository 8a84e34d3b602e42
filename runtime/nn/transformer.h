// nn::TransformerEncoderLayer: self-attention plus feed-forward block, PyTorch's layout and names.
#pragma once

#include <string>

#include "runtime/nn/attention.h"
#include "runtime/nn/dropout.h"
#include "runtime/nn/linear.h"
#include "runtime/nn/norm.h"

namespace kiln::nn {

/// PyTorch's TransformerEncoderLayer with batch_first=True: input [N, L, d_model]. Children (and
/// state-dict names): self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
/// Post-norm (norm_first = false): x = norm1(x + sa(x)); x = norm2(x + ff(x)). Pre-norm:
/// x = x + sa(norm1(x)); x = x + ff(norm2(x)). activation is "relu" or "gelu".
class TransformerEncoderLayer : public Module {
public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          double dropout = 0.1, std::string activation = "relu",
                          bool norm_first = false, double layer_norm_eps = 1e-5);

  /// src_mask and is_causal as MultiheadAttention's attn_mask and is_causal;
  /// src_key_padding_mask [N, L] marks padding positions.
  Tensor forward(const Tensor& src, const Tensor& src_mask, bool is_causal = false,
                 const Tensor& src_key_padding_mask = {});
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  using Module::operator();
  Tensor operator()(const Tensor& src, const Tensor& src_mask, bool is_causal = false,
                    const Tensor& src_key_padding_mask = {}) {
    return forward(src, src_mask, is_causal, src_key_padding_mask);
  }

  std::string activation;
  bool norm_first;
  MultiheadAttention self_attn;
  Linear linear1;
  Dropout dropout;
  Linear linear2;
  LayerNorm norm1;
  LayerNorm norm2;
  Dropout dropout1;
  Dropout dropout2;

private:
  Tensor self_attention_block(const Tensor& x, const Tensor& mask, bool is_causal,
                              const Tensor& key_padding_mask);
  Tensor feed_forward_block(const Tensor& x);
};

} // namespace kiln::nn
