// nn::MultiheadAttention: projections, mask canonicalisation (as F.multi_head_attention_forward)
// and scaled dot-product attention per head.
#include "runtime/nn/attention.h"

#include <limits>

#include "runtime/nn/init.h"
#include "runtime/ops.h"

namespace kiln::nn {
namespace {

/// A bool mask (true = masked out) becomes 0 / -inf in dtype; a float mask is cast to dtype.
Tensor additive_mask(const Tensor& mask, DType dtype, const char* what) {
  if (mask.dtype() == DType::bool_)
    return masked_fill(zeros(mask.sizes(), TensorOptions(dtype).device(mask.device())), mask,
                       -std::numeric_limits<double>::infinity());
  KILN_CHECK(is_floating(mask.dtype()), "MultiheadAttention: ", what,
             " must be bool or floating, "
             "got ",
             mask.dtype());
  return mask.to(dtype);
}

} // namespace

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, bool with_bias, double p)
    : embed_dim(e), num_heads(h), head_dim(h > 0 ? e / h : 0), dropout(p),
      out_proj(e, e, with_bias) {
  KILN_CHECK(e > 0 && h > 0, "MultiheadAttention: embed_dim and num_heads must be positive, got ",
             e, " and ", h);
  KILN_CHECK(e % h == 0, "MultiheadAttention: embed_dim (", e, ") must be divisible by num_heads (",
             h, ")");
  KILN_CHECK(p >= 0.0 && p <= 1.0,
             "MultiheadAttention: dropout has to be between 0 and 1, but "
             "got ",
             p);
  in_proj_weight = empty({3 * e, e});
  init::xavier_uniform_(in_proj_weight);
  register_parameter("in_proj_weight", in_proj_weight);
  if (with_bias) {
    in_proj_bias = zeros({3 * e});
    register_parameter("in_proj_bias", in_proj_bias);
    init::zeros_(out_proj.bias);
  }
  register_module("out_proj", out_proj);
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& attn_mask, bool is_causal,
                                   const Tensor& key_padding_mask) {
  const int64_t e = embed_dim;
  bool batched = query.dim() == 3;
  KILN_CHECK((query.dim() == 3 || query.dim() == 2) && key.dim() == query.dim() &&
                 value.dim() == query.dim(),
             "MultiheadAttention: query, key and value must all be [N, L, E] (batch first) or "
             "all [L, E], got ",
             shape_str(query.sizes()), ", ", shape_str(key.sizes()), " and ",
             shape_str(value.sizes()));
  Tensor q_in = batched ? query : query.unsqueeze(0);
  Tensor k_in = batched ? key : key.unsqueeze(0);
  Tensor v_in = batched ? value : value.unsqueeze(0);
  KILN_CHECK(q_in.size(2) == e && k_in.size(2) == e && v_in.size(2) == e,
             "MultiheadAttention: expected embedding size ", e, " in the last dim, got query ",
             shape_str(query.sizes()), ", key ", shape_str(key.sizes()), ", value ",
             shape_str(value.sizes()));
  KILN_CHECK(k_in.size(0) == q_in.size(0) && v_in.size(0) == q_in.size(0) &&
                 k_in.size(1) == v_in.size(1),
             "MultiheadAttention: key and value must have the same batch and length as each "
             "other and the batch of the query, got query ",
             shape_str(query.sizes()), ", key ", shape_str(key.sizes()), ", value ",
             shape_str(value.sizes()));
  const int64_t n = q_in.size(0), l = q_in.size(1), s = k_in.size(1), h = num_heads;

  // The packed projection holds q, k, v rows in that order (PyTorch's _in_projection_packed).
  auto project = [&](const Tensor& x, int64_t which, int64_t len) {
    Tensor w = in_proj_weight.slice(0, which * e, (which + 1) * e);
    Tensor b;
    if (in_proj_bias.defined()) b = in_proj_bias.slice(0, which * e, (which + 1) * e);
    return linear(x, w, b).view({n, len, h, head_dim}).transpose(1, 2); // [N, H, len, D]
  };
  Tensor q = project(q_in, 0, l);
  Tensor k = project(k_in, 1, s);
  Tensor v = project(v_in, 2, s);

  // One additive mask of shape broadcastable to [N, H, L, S], or none.
  DType dt = q.dtype();
  Tensor mask;
  auto add_mask = [&](const Tensor& m) { mask = mask.defined() ? mask + m : m; };
  if (attn_mask.defined()) {
    Tensor m = additive_mask(attn_mask, dt, "attn_mask");
    if (m.dim() == 2) {
      KILN_CHECK(m.size(0) == l && m.size(1) == s,
                 "MultiheadAttention: the 2-D attn_mask should "
                 "have shape [",
                 l, ", ", s, "], got ", shape_str(attn_mask.sizes()));
    } else {
      KILN_CHECK(m.dim() == 3 && m.size(0) == n * h && m.size(1) == l && m.size(2) == s,
                 "MultiheadAttention: the 3-D attn_mask should have shape [", n * h, ", ", l, ", ",
                 s, "], got ", shape_str(attn_mask.sizes()));
      m = m.view({n, h, l, s});
    }
    add_mask(m);
  }
  if (key_padding_mask.defined()) {
    KILN_CHECK(key_padding_mask.dim() == (batched ? 2 : 1) && key_padding_mask.size(-1) == s &&
                   (!batched || key_padding_mask.size(0) == n),
               "MultiheadAttention: key_padding_mask should have shape ",
               batched ? shape_str({n, s}) : shape_str({s}), ", got ",
               shape_str(key_padding_mask.sizes()));
    add_mask(additive_mask(key_padding_mask, dt, "key_padding_mask").view({n, 1, 1, s}));
  }
  if (is_causal) {
    // Combined with any explicit mask rather than trusting it to be the causal one.
    Tensor future =
        logical_not(tril(ones({l, s}, TensorOptions(DType::bool_).device(query.device()))));
    add_mask(additive_mask(future, dt, "causal mask"));
  }
  double p = is_training() ? dropout : 0.0;
  Tensor o = scaled_dot_product_attention(q, k, v, mask, p); // [N, H, L, D]
  o = o.transpose(1, 2).reshape({n, l, e});
  o = out_proj(o);
  return batched ? o : o.squeeze(0);
}

} // namespace kiln::nn
