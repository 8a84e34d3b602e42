// The op library: factories, pointwise, reductions, views, linear algebra, data movement and
// the composites (softmax, layer_norm, losses, attention). Every op here reaches its kernel
// through the one dispatch point (runtime/ops/dispatch.h); composites are built from
// primitives, so eager and traced code share one semantics.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/tensor.h"

namespace kiln {

// ---- factories ----
Tensor empty(IntList sizes, TensorOptions opts = {});
Tensor zeros(IntList sizes, TensorOptions opts = {});
Tensor ones(IntList sizes, TensorOptions opts = {});
Tensor full(IntList sizes, Scalar value, TensorOptions opts);
/// full({2,2}, 1.5f) takes its dtype from the value when no options are given (f32 for
/// floats, i64 for integers, bool for bools), as torch.full does.
Tensor full(IntList sizes, Scalar value);
Tensor arange(Scalar end, TensorOptions opts);
Tensor arange(Scalar start, Scalar end, Scalar step = 1);
Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions opts);
Tensor arange(Scalar end);
/// Uniform in [0, 1) from the Philox stream.
Tensor rand(IntList sizes, TensorOptions opts = {});
/// Standard normal (Box-Muller over Philox).
Tensor randn(IntList sizes, TensorOptions opts = {});
Tensor randint(int64_t low, int64_t high, IntList sizes, TensorOptions opts = DType::i64);
/// The *_like factories take t's sizes, dtype and device.
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
/// A tensor holding these values; shape defaults to {values.size()}.
template <typename T> Tensor tensor(const std::vector<T>& values, IntList shape = {});
template <typename T> Tensor tensor(std::initializer_list<T> values) {
  return tensor(std::vector<T>(values));
}
/// A 0-d tensor holding one number, with the scalar's default dtype or the given one.
Tensor scalar_tensor(Scalar v, std::optional<DType> dtype = std::nullopt);

// ---- pointwise (broadcasting, PyTorch type promotion incl. scalar operands) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
/// True division: integer inputs give a floating result.
Tensor div(const Tensor& a, const Tensor& b);
/// Division rounded toward -inf (Python's //); integer division by zero is an error.
Tensor floor_divide(const Tensor& a, const Tensor& b);
/// Remainder with the sign of the divisor (Python's %).
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, Scalar b);
Tensor maximum(const Tensor& a, const Tensor& b); // NaN propagates
Tensor minimum(const Tensor& a, const Tensor& b); // NaN propagates
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a); // relu(NaN) = NaN
/// GELU; approximate = "none" (erf) or "tanh".
Tensor gelu(const Tensor& a, const std::string& approximate = "none");
Tensor silu(const Tensor& a);
Tensor erf(const Tensor& a);
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor round(const Tensor& a); // half to even, as PyTorch
Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor masked_fill(const Tensor& a, const Tensor& mask, Scalar value);
Tensor tril(const Tensor& a, int64_t diagonal = 0);
Tensor triu(const Tensor& a, int64_t diagonal = 0);

// Scalar overloads of the binary ops (the scalar is a weak operand in promotion).
#define KILN_SCALAR_OVERLOADS(name)                                                                \
  Tensor name(const Tensor& a, Scalar b);                                                          \
  Tensor name(Scalar a, const Tensor& b);
KILN_SCALAR_OVERLOADS(add)
KILN_SCALAR_OVERLOADS(sub)
KILN_SCALAR_OVERLOADS(mul)
KILN_SCALAR_OVERLOADS(div)
KILN_SCALAR_OVERLOADS(floor_divide)
KILN_SCALAR_OVERLOADS(remainder)
KILN_SCALAR_OVERLOADS(maximum)
KILN_SCALAR_OVERLOADS(minimum)
KILN_SCALAR_OVERLOADS(eq)
KILN_SCALAR_OVERLOADS(ne)
KILN_SCALAR_OVERLOADS(lt)
KILN_SCALAR_OVERLOADS(le)
KILN_SCALAR_OVERLOADS(gt)
KILN_SCALAR_OVERLOADS(ge)
#undef KILN_SCALAR_OVERLOADS

// Operators.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator%(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator!(const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator&&(const Tensor& a, const Tensor& b);
Tensor operator||(const Tensor& a, const Tensor& b);
#define KILN_SCALAR_OPERATOR(op)                                                                   \
  Tensor operator op(const Tensor& a, Scalar b);                                                   \
  Tensor operator op(Scalar a, const Tensor& b);
KILN_SCALAR_OPERATOR(+)
KILN_SCALAR_OPERATOR(-)
KILN_SCALAR_OPERATOR(*)
KILN_SCALAR_OPERATOR(/)
KILN_SCALAR_OPERATOR(%)
KILN_SCALAR_OPERATOR(==)
KILN_SCALAR_OPERATOR(!=)
KILN_SCALAR_OPERATOR(<)
KILN_SCALAR_OPERATOR(<=)
KILN_SCALAR_OPERATOR(>)
KILN_SCALAR_OPERATOR(>=)
#undef KILN_SCALAR_OPERATOR

// ---- reductions (dims may be negative; empty dims = all) ----
Tensor sum(const Tensor& a, IntList dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& a, IntList dims = {}, bool keepdim = false);
Tensor max(const Tensor& a, IntList dims = {}, bool keepdim = false); // NaN propagates
Tensor min(const Tensor& a, IntList dims = {}, bool keepdim = false); // NaN propagates
Tensor amax(const Tensor& a, IntList dims = {}, bool keepdim = false);
Tensor amin(const Tensor& a, IntList dims = {}, bool keepdim = false);
Tensor prod(const Tensor& a, IntList dims = {}, bool keepdim = false);
Tensor var(const Tensor& a, IntList dims = {}, bool keepdim = false, int64_t correction = 1);
Tensor std(const Tensor& a, IntList dims = {}, bool keepdim = false, int64_t correction = 1);
/// Index of the first maximum (a NaN counts as the maximum); no dim = over the flattened tensor.
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor cumsum(const Tensor& a, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);

// ---- views and shape ----
Tensor view(const Tensor& a, IntList sizes);
Tensor reshape(const Tensor& a, IntList sizes);
Tensor permute(const Tensor& a, IntList dims);
Tensor transpose(const Tensor& a, int64_t d0, int64_t d1);
Tensor expand(const Tensor& a, IntList sizes);
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor squeeze(const Tensor& a);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
Tensor flatten(const Tensor& a, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor contiguous(const Tensor& a);
Tensor clone(const Tensor& a);
Tensor to(const Tensor& a, DType t);

// ---- linear algebra, convolution, pooling ----
/// torch.matmul: 1-d/2-d/batched with broadcasting of batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
/// Batched [B,n,k] x [B,k,m].
Tensor bmm(const Tensor& a, const Tensor& b);
/// x @ weight^T + bias; weight [out, in].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
/// NCHW input, OIHW weight (O = out channels, I = in channels / groups).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
              std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, std::vector<int64_t> dilation = {1, 1},
                  bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0, 0}, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size);

// ---- normalisation, activation, losses, attention (composites) ----
Tensor layer_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
/// In training mode, updates running_mean/running_var in place (unbiased variance), as PyTorch.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);
Tensor dropout(const Tensor& x, double p, bool training);
/// Rows `indices` of `weight` [num_embeddings, dim], as torch::embedding(weight, indices):
/// weight first, the reverse of Python's F.embedding(input, weight). Swapped arguments (an
/// integer weight and floating indices) are an error that says so.
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor one_hot(const Tensor& indices, int64_t num_classes);
/// Logits [N, C] (or [N, C, ...]) and class indices [N]; reduction "mean", "sum" or "none".
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const std::string& reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
/// Log-probabilities [N, C] (or [N, C, ...]) and class indices: -log_probs[target], as
/// F.nll_loss; targets equal to ignore_index add nothing and "mean" divides by the others.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                const std::string& reduction = "mean", int64_t ignore_index = -100);
/// -(y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))), computed stably as PyTorch does.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        const std::string& reduction = "mean");
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
/// softmax(q k^T * scale + mask) v over the last two dims; is_causal masks the future.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

// ---- data movement ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
/// A copy of a with src written at index along dim (out-of-place scatter).
Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
/// Constant padding; pads lists (left, right) pairs from the last dim backwards, as F.pad.
Tensor pad(const Tensor& a, std::vector<int64_t> pads, double value = 0.0);

// ---- data-dependent shapes (read the data on the host: a graph break when traced) ----
/// Indices of the nonzero elements, [count, a.dim()] i64, in row-major order (torch.nonzero).
Tensor nonzero(const Tensor& a);
/// The elements of a where mask (bool, broadcast to a's shape) is true, 1-d, row-major
/// (torch.masked_select, the same as a[mask]).
Tensor masked_select(const Tensor& a, const Tensor& mask);

// ---- random state ----
/// Seeds the global Philox generator and resets its offset.
void manual_seed(uint64_t seed);

// ---- threads ----
/// Threads used by kiln's kernels and by oneDNN (one OpenMP pool).
void set_num_threads(int n);
int get_num_threads();

} // namespace kiln
