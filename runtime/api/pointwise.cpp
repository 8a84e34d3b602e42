// The public pointwise ops: primitives through dispatch, their Scalar overloads and operators,
// casts, and the pointwise composites (gelu, silu, clamp, masked_fill, tril/triu).
#include <numbers>

#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"

namespace kiln {
namespace {

Tensor unary(Op op, const Tensor& a) { return dispatch1(op, {a}); }
Tensor binary(Op op, const Tensor& a, const Tensor& b) { return dispatch1(op, {a, b}); }

void check_floating(const Tensor& a, const char* op) {
  KILN_CHECK(is_floating(a.dtype()), op, ": expected a floating-point tensor, got ", a.dtype(),
             " with shape ", shape_str(a.sizes()));
}

/// tril/triu's mask: true where col - row compares with `diagonal` as `keep` says, shaped
/// [rows, cols] so it broadcasts over a's batch dims.
Tensor diagonal_mask(const Tensor& a, int64_t diagonal, bool lower, const char* op) {
  KILN_CHECK(a.dim() >= 2, op, ": expected a tensor with at least 2 dims, got shape ",
             shape_str(a.sizes()));
  const TensorOptions where = TensorOptions(DType::i64).device(a.device());
  Tensor rows = unsqueeze(arange(a.size(-2), where), 1);
  Tensor cols = arange(a.size(-1), where);
  Tensor offset = sub(cols, rows); // [rows, cols]: col - row
  return lower ? le(offset, diagonal) : ge(offset, diagonal);
}

} // namespace

// ---- binary primitives ----
Tensor add(const Tensor& a, const Tensor& b) { return binary(Op::add, a, b); }
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  if (!alpha.is_floating() && alpha.to_int() == 1) return add(a, b);
  DType rt = result_type(std::vector<TensorMeta>{TensorMeta::of(a), TensorMeta::of(b)});
  KILN_CHECK(!alpha.is_floating() || is_floating(rt),
             "add: for integral input tensors, argument alpha must not be a floating point number");
  KILN_CHECK(!alpha.is_integral() || rt != DType::bool_,
             "add: boolean alpha only supported for boolean results");
  // b * alpha alone would promote on its own (bool b * 2 is i64, bool b * 2.5 is f32) and
  // lift the result above result_type(a, b): scale b in the result dtype. A 0-d b beside a
  // dim-ful a keeps its dtype (and precision), since it can't raise the result.
  Tensor scaled_b = b.dim() == 0 && a.dim() != 0 ? b : to(b, rt);
  return add(a, mul(scaled_b, alpha));
}
Tensor sub(const Tensor& a, const Tensor& b) { return binary(Op::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(Op::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(Op::div, a, b); }
Tensor floor_divide(const Tensor& a, const Tensor& b) { return binary(Op::floor_divide, a, b); }
Tensor remainder(const Tensor& a, const Tensor& b) { return binary(Op::remainder, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(Op::pow, a, b); }
Tensor pow(const Tensor& a, Scalar b) {
  // Bool bases count as integers here, as in PyTorch (bool ^ int computes in i64).
  bool int_base = is_integral(a.dtype()) || a.dtype() == DType::bool_;
  KILN_CHECK(!(int_base && b.is_integral() && b.to_int() < 0),
             "pow: integers to negative integer powers are not allowed (base ", a.dtype(),
             " with shape ", shape_str(a.sizes()), ", exponent ", b.to_int(), ")");
  return binary(Op::pow, a, wrap_scalar(b));
}
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(Op::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(Op::minimum, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(Op::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(Op::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(Op::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(Op::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(Op::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(Op::ge, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return binary(Op::logical_and, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary(Op::logical_or, a, b); }

// ---- unary primitives ----
Tensor logical_not(const Tensor& a) { return unary(Op::logical_not, a); }
Tensor neg(const Tensor& a) { return unary(Op::neg, a); }
Tensor abs(const Tensor& a) { return unary(Op::abs, a); }
Tensor exp(const Tensor& a) { return unary(Op::exp, a); }
Tensor log(const Tensor& a) { return unary(Op::log, a); }
Tensor sqrt(const Tensor& a) { return unary(Op::sqrt, a); }
Tensor rsqrt(const Tensor& a) { return unary(Op::rsqrt, a); }
Tensor sin(const Tensor& a) { return unary(Op::sin, a); }
Tensor cos(const Tensor& a) { return unary(Op::cos, a); }
Tensor tanh(const Tensor& a) { return unary(Op::tanh, a); }
Tensor sigmoid(const Tensor& a) { return unary(Op::sigmoid, a); }
Tensor relu(const Tensor& a) { return unary(Op::relu, a); }
Tensor erf(const Tensor& a) { return unary(Op::erf, a); }
Tensor floor(const Tensor& a) { return unary(Op::floor, a); }
Tensor ceil(const Tensor& a) { return unary(Op::ceil, a); }
Tensor round(const Tensor& a) { return unary(Op::round, a); }

Tensor to(const Tensor& a, DType t) {
  if (a.dtype() == t) return a;
  return dispatch1(Op::cast, {a}, Attrs{t});
}

// ---- composites ----
Tensor gelu(const Tensor& a, const std::string& approximate) {
  check_floating(a, "gelu");
  constexpr double kSqrtHalf = 0.70710678118654752440; // 1/sqrt(2)
  if (approximate == "none") return mul(mul(a, 0.5), add(erf(mul(a, kSqrtHalf)), 1));
  KILN_CHECK(approximate == "tanh", "gelu: approximate must be \"none\" or \"tanh\", got \"",
             approximate, "\"");
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as PyTorch's tanh approximation.
  constexpr double kBeta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi; // sqrt(2/pi)
  Tensor inner = mul(add(a, mul(mul(mul(a, a), a), 0.044715)), kBeta);
  return mul(mul(a, 0.5), add(tanh(inner), 1));
}

Tensor silu(const Tensor& a) {
  check_floating(a, "silu");
  return mul(a, sigmoid(a));
}

Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max) {
  KILN_CHECK(min || max, "clamp: at least one of min and max must be given (shape ",
             shape_str(a.sizes()), ")");
  Tensor r = a;
  if (min) r = maximum(r, *min);
  if (max) r = minimum(r, *max);
  return r;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return dispatch1(Op::where, {cond, a, b});
}
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  return where(cond, a, wrap_scalar(b));
}
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  return where(cond, wrap_scalar(a), b);
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, Scalar value) {
  KILN_CHECK(mask.dtype() == DType::bool_, "masked_fill: expected a bool mask, got ", mask.dtype(),
             " with shape ", shape_str(mask.sizes()));
  // Like PyTorch's masked_fill (a clone filled in place), the result keeps a's shape and dtype.
  KILN_CHECK(broadcast_shapes(a.sizes(), mask.sizes(), "masked_fill") == a.sizes(),
             "masked_fill: mask of shape ", shape_str(mask.sizes()),
             " doesn't broadcast to the input's shape ", shape_str(a.sizes()));
  return where(mask, scalar_tensor(value, a.dtype()), a);
}

Tensor tril(const Tensor& a, int64_t diagonal) {
  return where(diagonal_mask(a, diagonal, true, "tril"), a, scalar_tensor(0, a.dtype()));
}
Tensor triu(const Tensor& a, int64_t diagonal) {
  return where(diagonal_mask(a, diagonal, false, "triu"), a, scalar_tensor(0, a.dtype()));
}

// ---- Scalar overloads: the scalar is a weak (wrapped number) operand ----
#define KILN_SCALAR_OVERLOADS(name)                                                                \
  Tensor name(const Tensor& a, Scalar b) { return name(a, wrap_scalar(b)); }                       \
  Tensor name(Scalar a, const Tensor& b) { return name(wrap_scalar(a), b); }
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

// ---- operators ----
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator!(const Tensor& a) { return logical_not(a); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }

#define KILN_SCALAR_OPERATOR(op, fn)                                                               \
  Tensor operator op(const Tensor& a, Scalar b) { return fn(a, b); }                               \
  Tensor operator op(Scalar a, const Tensor& b) { return fn(a, b); }
KILN_SCALAR_OPERATOR(+, add)
KILN_SCALAR_OPERATOR(-, sub)
KILN_SCALAR_OPERATOR(*, mul)
KILN_SCALAR_OPERATOR(/, div)
KILN_SCALAR_OPERATOR(%, remainder)
KILN_SCALAR_OPERATOR(==, eq)
KILN_SCALAR_OPERATOR(!=, ne)
KILN_SCALAR_OPERATOR(<, lt)
KILN_SCALAR_OPERATOR(<=, le)
KILN_SCALAR_OPERATOR(>, gt)
KILN_SCALAR_OPERATOR(>=, ge)
#undef KILN_SCALAR_OPERATOR

} // namespace kiln
