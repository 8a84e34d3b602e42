// The torch.nn.functional composites: layer_norm, batch_norm, dropout, embedding, one_hot,
// cross_entropy, mse_loss and scaled_dot_product_attention, built only from public ops.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/ops.h"
#include "runtime/tracing.h"

namespace kiln {

namespace {

/// Reduced floats (f16/bf16) normalise in f32 and round once at the end, as PyTorch's CPU
/// kernels do; other dtypes compute in place.
Tensor upcast(const Tensor& x) { return is_reduced_float(x.dtype()) ? to(x, DType::f32) : x; }

/// Shape [1, C, 1, ...] of rank `rank`, for broadcasting per-channel values over NC... input.
Shape channel_shape(int64_t c, int64_t rank) {
  Shape s(static_cast<size_t>(rank), 1);
  s[1] = c;
  return s;
}

void check_reduction(const std::string& reduction, const char* op) {
  KILN_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", op,
             ": reduction must be 'mean', 'sum' or 'none', got '", reduction, "'");
}

Tensor reduce_loss(const Tensor& loss, const std::string& reduction) {
  if (reduction == "mean") return mean(loss);
  if (reduction == "sum") return sum(loss);
  return loss;
}

} // namespace

Tensor layer_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool matches = k >= 1 && k <= x.dim();
  for (int64_t i = 0; matches && i < k; ++i)
    matches = x.size(x.dim() - k + i) == normalized_shape[static_cast<size_t>(i)];
  KILN_CHECK(matches, "layer_norm: normalized_shape ", shape_str(normalized_shape),
             " does not match the trailing dims of input ", shape_str(x.sizes()));
  KILN_CHECK(is_floating(x.dtype()), "layer_norm: expected a floating input, got ", x.dtype());
  for (const Tensor* p : {&weight, &bias})
    KILN_CHECK(!p->defined() || IntList(p->sizes()) == normalized_shape,
               "layer_norm: ", p == &weight ? "weight" : "bias", " of shape ",
               shape_str(p->sizes()), " does not match normalized_shape ",
               shape_str(normalized_shape));
  std::vector<int64_t> dims;
  for (int64_t i = -k; i < 0; ++i)
    dims.push_back(i);
  Tensor xf = upcast(x);
  Tensor centered = sub(xf, mean(xf, dims, /*keepdim=*/true));
  Tensor variance = mean(mul(centered, centered), dims, /*keepdim=*/true); // biased
  Tensor y = mul(centered, rsqrt(add(variance, Scalar(eps))));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return to(y, x.dtype());
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  KILN_CHECK(x.dim() >= 2, "batch_norm: expected an input with at least 2 dims (N, C, ...), got ",
             shape_str(x.sizes()));
  KILN_CHECK(is_floating(x.dtype()), "batch_norm: expected a floating input, got ", x.dtype());
  const int64_t c = x.size(1);
  const char* names[] = {"running_mean", "running_var", "weight", "bias"};
  const Tensor* params[] = {&running_mean, &running_var, &weight, &bias};
  for (int i = 0; i < 4; ++i)
    KILN_CHECK(!params[i]->defined() || params[i]->numel() == c, "batch_norm: ", names[i],
               " should contain ", c, " elements (the channels of input ", shape_str(x.sizes()),
               "), got ", shape_str(params[i]->sizes()));
  KILN_CHECK(running_mean.defined() == running_var.defined(),
             "batch_norm: running_mean and running_var must be given together");
  const Shape cshape = channel_shape(c, x.dim());
  Tensor xf = upcast(x);
  Tensor centered;
  Tensor inv_std;
  if (training) {
    const int64_t per_channel = c == 0 ? 0 : x.numel() / c;
    KILN_CHECK(per_channel > 1,
               "batch_norm: expected more than 1 value per channel when training, got input ",
               shape_str(x.sizes()));
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < x.dim(); ++d)
      dims.push_back(d);
    Tensor batch_mean = mean(xf, dims, /*keepdim=*/true);
    centered = sub(xf, batch_mean);
    Tensor batch_var = mean(mul(centered, centered), dims, /*keepdim=*/true); // biased
    inv_std = rsqrt(add(batch_var, Scalar(eps)));
    if (running_mean.defined()) {
      // In place so every holder of the buffers (a module, an optimizer) sees the update and
      // the version counters record it; the running variance is the unbiased estimate.
      const double unbias = static_cast<double>(per_channel) / static_cast<double>(per_channel - 1);
      Tensor rm = running_mean;
      Tensor rv = running_var;
      rm.mul_(Scalar(1.0 - momentum));
      rm.add_(mul(reshape(batch_mean, rm.sizes()), Scalar(momentum)));
      rv.mul_(Scalar(1.0 - momentum));
      rv.add_(mul(reshape(batch_var, rv.sizes()), Scalar(momentum * unbias)));
    }
  } else {
    KILN_CHECK(running_mean.defined(),
               "batch_norm: running_mean and running_var are required in eval mode");
    centered = sub(xf, reshape(running_mean, cshape));
    inv_std = rsqrt(add(reshape(running_var, cshape), Scalar(eps)));
  }
  Tensor y = mul(centered, inv_std);
  if (weight.defined()) y = mul(y, reshape(weight, cshape));
  if (bias.defined()) y = add(y, reshape(bias, cshape));
  return to(y, x.dtype());
}

Tensor dropout(const Tensor& x, double p, bool training) {
  KILN_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0.0) return x;
  KILN_CHECK(is_floating(x.dtype()), "dropout: expected a floating input, got ", x.dtype());
  // PyTorch multiplies by a zero scalar, so NaN and Inf inputs give NaN.
  if (p == 1.0) return mul(x, Scalar(0.0));
  // As PyTorch's _dropout_impl: noise = bernoulli(1 - p) / (1 - p) in x's dtype, then x * noise.
  Tensor keep = lt(rand_like(x), Scalar(1.0 - p));
  Tensor noise = div(to(keep, x.dtype()), Scalar(1.0 - p));
  return mul(x, noise);
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  KILN_CHECK(!(is_integral(weight.dtype()) && is_floating(indices.dtype())),
             "embedding: the arguments look swapped: kiln::embedding(weight, indices) follows "
             "torch::embedding, weight first (Python's F.embedding(input, weight) is the "
             "reverse); got weight ",
             weight.dtype(), shape_str(weight.sizes()), " and indices ", indices.dtype(),
             shape_str(indices.sizes()));
  KILN_CHECK(weight.dim() == 2, "embedding: weight must be 2-d [num_embeddings, dim], got ",
             shape_str(weight.sizes()));
  KILN_CHECK(is_integral(indices.dtype()), "embedding: indices must be an integer tensor, got ",
             indices.dtype());
  Shape out_shape = indices.sizes();
  out_shape.push_back(weight.size(1));
  return reshape(index_select(weight, 0, reshape(indices, {-1})), out_shape);
}

namespace {
/// The min and max of an integer tensor, read on the host: a graph break when it is traced,
/// and for a concrete tensor read untraced (a replay then guards its version).
std::pair<int64_t, int64_t> host_min_max(const Tensor& t) {
  HostReadScope read(&t, HostRead::item);
  return {amin(t).item<int64_t>(), amax(t).item<int64_t>()};
}
} // namespace

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  KILN_CHECK(is_integral(indices.dtype()), "one_hot: indices must be an integer tensor, got ",
             indices.dtype());
  KILN_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 (infer) or non-negative, got ",
             num_classes);
  if (indices.numel() > 0) {
    const auto [lo, hi] = host_min_max(indices);
    KILN_CHECK(lo >= 0, "one_hot: class values must be non-negative, got ", lo);
    if (num_classes == -1) num_classes = hi + 1;
    KILN_CHECK(hi < num_classes, "one_hot: class values must be smaller than num_classes (",
               num_classes, "), got ", hi);
  } else {
    KILN_CHECK(num_classes != -1,
               "one_hot: cannot infer the number of classes from an empty tensor");
  }
  Tensor classes = arange(Scalar(int64_t{0}), Scalar(num_classes), Scalar(int64_t{1}),
                          TensorOptions(DType::i64).device(indices.device()));
  return to(eq(unsqueeze(to(indices, DType::i64), -1), classes), DType::i64);
}

namespace {

/// The checks of cross_entropy and nll_loss: floating scores [N, C, ...] (or [C] with a 0-d
/// target), integer targets of the scores' shape without C, each in [0, C) or ignore_index
/// (read on the host, unless traced: then the gather's kernel refuses a bad index).
void check_classes(const Tensor& scores, const Tensor& target, int64_t ignore_index, const char* op,
                   const char* what) {
  KILN_CHECK(is_floating(scores.dtype()), op, ": expected floating ", what, ", got ",
             scores.dtype());
  KILN_CHECK(is_integral(target.dtype()), op,
             ": expected target to hold class indices (an integer dtype), got ", target.dtype());
  KILN_CHECK(scores.dim() >= 1, op, ": expected ", what, " [N, C] or [N, C, ...], got ",
             shape_str(scores.sizes()));
  if (scores.dim() == 1) {
    KILN_CHECK(target.dim() == 0, op, ": expected a 0-d target for ", what, " ",
               shape_str(scores.sizes()), ", got ", shape_str(target.sizes()));
    return;
  }
  Shape expected = scores.sizes();
  expected.erase(expected.begin() + 1);
  KILN_CHECK(target.sizes() == expected, op, ": expected target of shape ", shape_str(expected),
             " for ", what, " ", shape_str(scores.sizes()), ", got ", shape_str(target.sizes()));
  const int64_t classes = scores.size(1);
  if (target.numel() > 0 && !target.is_traced()) {
    HostReadScope read(&target, HostRead::item);
    const Tensor t = to(target, DType::i64).to(Device::cpu()).contiguous();
    const auto* v = static_cast<const int64_t*>(t.raw_data());
    for (int64_t k = 0; k < t.numel(); ++k)
      KILN_CHECK(v[k] == ignore_index || (v[k] >= 0 && v[k] < classes), op, ": target ", v[k],
                 " is out of bounds for ", classes, " classes");
  }
}

/// Per element: -log_probs[target] and whether it counts (target != ignore_index), both in the
/// target's shape; log_probs is [N, C, ...].
std::pair<Tensor, Tensor> picked_nll(const Tensor& log_probs, const Tensor& target,
                                     int64_t ignore_index) {
  const Tensor t = to(target, DType::i64);
  const Tensor keep = t != Scalar(ignore_index);
  const Tensor safe = where(keep, t, zeros_like(t)); // an ignored target reads class 0
  const Tensor picked = squeeze(gather(log_probs, 1, unsqueeze(safe, 1)), 1);
  return {where(keep, neg(picked), zeros_like(picked)), keep};
}

/// "mean" over the counted elements (PyTorch's nll_loss with ignore_index), or sum, or none.
Tensor reduce_counted(const Tensor& loss, const Tensor& keep, const std::string& reduction) {
  if (reduction == "none") return loss;
  if (reduction == "sum") return sum(loss);
  return div(sum(loss), sum(keep, {}, false, loss.dtype()));
}

} // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::string& reduction,
                int64_t ignore_index) {
  check_reduction(reduction, "nll_loss");
  check_classes(log_probs, target, ignore_index, "nll_loss", "log_probs");
  if (log_probs.dim() == 1) {
    Tensor loss = nll_loss(unsqueeze(log_probs, 0), unsqueeze(target, 0), "none", ignore_index);
    return reduction == "none" ? squeeze(loss, 0) : reduce_loss(squeeze(loss, 0), "sum");
  }
  const auto [loss, keep] = picked_nll(log_probs, target, ignore_index);
  return reduce_counted(loss, keep, reduction);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::string& reduction,
                     int64_t ignore_index, double label_smoothing) {
  check_reduction(reduction, "cross_entropy");
  KILN_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
             "cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing);
  check_classes(logits, target, ignore_index, "cross_entropy", "logits");
  // Unbatched logits [C] with a 0-d target are a batch of one.
  if (logits.dim() == 1) {
    Tensor loss = cross_entropy(unsqueeze(logits, 0), unsqueeze(target, 0), "none", ignore_index,
                                label_smoothing);
    return reduction == "none" ? squeeze(loss, 0) : reduce_loss(squeeze(loss, 0), "sum");
  }
  const Tensor log_probs = log_softmax(logits, 1);
  const auto [nll, keep] = picked_nll(log_probs, target, ignore_index);
  if (label_smoothing == 0) return reduce_counted(nll, keep, reduction);
  // PyTorch: (1 - e) nll + e / C * (-sum_c log_probs), both over the counted elements.
  const Tensor smooth = neg(sum(log_probs, {1}, false, log_probs.dtype()));
  const Tensor smooth_kept = where(keep, smooth, zeros_like(smooth));
  const double classes = static_cast<double>(logits.size(1));
  return add(mul(reduce_counted(nll, keep, reduction), 1 - label_smoothing),
             mul(reduce_counted(smooth_kept, keep, reduction), label_smoothing / classes));
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        const std::string& reduction) {
  check_reduction(reduction, "binary_cross_entropy_with_logits");
  KILN_CHECK(logits.sizes() == target.sizes(), "binary_cross_entropy_with_logits: target of shape ",
             shape_str(target.sizes()), " for logits ", shape_str(logits.sizes()));
  // PyTorch's stable form: (1 - y) x + m + log(e^-m + e^(-x - m)), m = max(-x, 0).
  const Tensor m = maximum(neg(logits), Scalar(0.0));
  const Tensor loss = add(add(mul(sub(Scalar(1.0), target), logits), m),
                          log(add(exp(neg(m)), exp(sub(neg(logits), m)))));
  return reduce_loss(loss, reduction);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction(reduction, "mse_loss");
  Tensor d = sub(input, target);
  return reduce_loss(mul(d, d), reduction);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  KILN_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, op,
             ": expected q, k and v with at least 2 dims, got ", shape_str(q.sizes()), ", ",
             shape_str(k.sizes()), " and ", shape_str(v.sizes()));
  KILN_CHECK(q.size(-1) == k.size(-1), op, ": q ", shape_str(q.sizes()), " and k ",
             shape_str(k.sizes()), " must have the same embedding size (last dim)");
  KILN_CHECK(k.size(-2) == v.size(-2), op, ": k ", shape_str(k.sizes()), " and v ",
             shape_str(v.sizes()), " must have the same sequence length (dim -2)");
  KILN_CHECK(!(is_causal && attn_mask.defined()), op,
             ": attn_mask and is_causal cannot both be set");
  KILN_CHECK(!attn_mask.defined() || attn_mask.dtype() == DType::bool_ ||
                 is_floating(attn_mask.dtype()),
             op, ": attn_mask must be bool or floating, got ", attn_mask.dtype());
  const int64_t l = q.size(-2), s = k.size(-2);
  const double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  Tensor scores = mul(matmul(q, transpose(k, -2, -1)), Scalar(sc));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    // Query i sees keys j <= i (the top-left aligned lower triangle, as PyTorch).
    Tensor keep = tril(ones({l, s}, TensorOptions(DType::bool_).device(q.device())));
    scores = masked_fill(scores, logical_not(keep), Scalar(neg_inf));
  } else if (attn_mask.defined()) {
    scores = attn_mask.dtype() == DType::bool_
                 ? masked_fill(scores, logical_not(attn_mask), Scalar(neg_inf))
                 : add(scores, attn_mask);
  }
  Tensor attn = softmax(scores, -1);
  if (dropout_p > 0.0) attn = dropout(attn, dropout_p, /*training=*/true);
  return matmul(attn, v);
}

} // namespace kiln
