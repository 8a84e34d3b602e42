// nn::TransformerEncoderLayer: construction in PyTorch's registration order and the two
// residual blocks (torch/nn/modules/transformer.py, the non-fast path).
#include "runtime/nn/transformer.h"

#include "runtime/ops.h"

namespace kiln::nn {

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_ff,
                                                 double p, std::string act, bool norm_first_,
                                                 double eps)
    : activation(std::move(act)), norm_first(norm_first_), self_attn(d_model, nhead, true, p),
      linear1(d_model, dim_ff), dropout(p), linear2(dim_ff, d_model),
      norm1(std::vector<int64_t>{d_model}, eps), norm2(std::vector<int64_t>{d_model}, eps),
      dropout1(p), dropout2(p) {
  KILN_CHECK(activation == "relu" || activation == "gelu",
             "TransformerEncoderLayer: activation "
             "should be \"relu\" or \"gelu\", not \"",
             activation, "\"");
  register_module("self_attn", self_attn);
  register_module("linear1", linear1);
  register_module("dropout", dropout);
  register_module("linear2", linear2);
  register_module("norm1", norm1);
  register_module("norm2", norm2);
  register_module("dropout1", dropout1);
  register_module("dropout2", dropout2);
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& mask,
                                                     bool is_causal, const Tensor& kpm) {
  return dropout1(self_attn(x, x, x, mask, is_causal, kpm));
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  Tensor h = linear1(x);
  h = activation == "gelu" ? gelu(h) : relu(h);
  return dropout2(linear2(dropout(h)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, bool is_causal,
                                        const Tensor& src_key_padding_mask) {
  Tensor x = src;
  if (norm_first) {
    x = x + self_attention_block(norm1(x), src_mask, is_causal, src_key_padding_mask);
    x = x + feed_forward_block(norm2(x));
  } else {
    x = norm1(x + self_attention_block(x, src_mask, is_causal, src_key_padding_mask));
    x = norm2(x + feed_forward_block(x));
  }
  return x;
}

} // namespace kiln::nn
