// Shape and dtype inference for the pointwise ops: broadcasting and PyTorch's type promotion.
#include "runtime/ops/dispatch.h"
#include "runtime/ops/op.h"

namespace kiln::ops {
namespace {

/// The device of the first operand that is not a wrapped number.
Device device_of(std::span<const TensorMeta> in) {
  for (const TensorMeta& m : in)
    if (!m.wrapped_number) return m.device;
  return in.empty() ? Device::cpu() : in[0].device;
}

Shape broadcast_all(std::span<const TensorMeta> in, const char* op) {
  Shape s = in[0].sizes;
  for (size_t k = 1; k < in.size(); ++k)
    s = broadcast_shapes(s, in[k].sizes, op);
  return s;
}

std::vector<TensorMeta> result(std::span<const TensorMeta> in, DType dtype, const char* op) {
  return {TensorMeta{dtype, device_of(in), broadcast_all(in, op), {}, false}};
}

/// Names both operands for an error message: "i32 [2, 3] and bool [3]".
std::string operands_str(std::span<const TensorMeta> in) {
  std::string s;
  for (size_t k = 0; k < in.size(); ++k) {
    if (k) s += " and ";
    s += detail::str(in[k].dtype, " ", shape_str(in[k].sizes));
  }
  return s;
}

void check_not_bool(std::span<const TensorMeta> in, DType t, const char* op) {
  KILN_CHECK(t != DType::bool_, op, ": not supported for bool tensors (got ", operands_str(in),
             ")");
}

// ---- unary ----

/// neg, abs, relu, floor, ceil, round: the input's dtype (bool refused, as PyTorch).
std::vector<TensorMeta> same_dtype_unary(std::span<const TensorMeta> in, const char* op) {
  check_not_bool(in, in[0].dtype, op);
  return result(in, in[0].dtype, op);
}

/// exp, log, sin, ...: floating inputs keep their dtype, integers and bools give f32.
std::vector<TensorMeta> float_unary(std::span<const TensorMeta> in, const char* op) {
  return result(in, is_floating(in[0].dtype) ? in[0].dtype : kDefaultFloat, op);
}

// ---- binary ----

std::vector<TensorMeta> arithmetic(std::span<const TensorMeta> in, const char* op,
                                   bool allow_bool) {
  DType t = result_type(in);
  if (!allow_bool) check_not_bool(in, t, op);
  return result(in, t, op);
}

std::vector<TensorMeta> to_bool(std::span<const TensorMeta> in, const char* op) {
  return result(in, DType::bool_, op);
}

} // namespace

std::vector<TensorMeta> infer_neg(std::span<const TensorMeta> in, const Attrs&) {
  KILN_CHECK(in[0].dtype != DType::bool_,
             "neg: negation, the `-` operator, on a bool tensor is not supported; use logical_not "
             "(the `!` operator) to invert a mask (shape ",
             shape_str(in[0].sizes), ")");
  return result(in, in[0].dtype, "neg");
}
std::vector<TensorMeta> infer_abs(std::span<const TensorMeta> in, const Attrs&) {
  return same_dtype_unary(in, "abs");
}
std::vector<TensorMeta> infer_relu(std::span<const TensorMeta> in, const Attrs&) {
  return same_dtype_unary(in, "relu");
}
std::vector<TensorMeta> infer_floor(std::span<const TensorMeta> in, const Attrs&) {
  return same_dtype_unary(in, "floor");
}
std::vector<TensorMeta> infer_ceil(std::span<const TensorMeta> in, const Attrs&) {
  return same_dtype_unary(in, "ceil");
}
std::vector<TensorMeta> infer_round(std::span<const TensorMeta> in, const Attrs&) {
  return same_dtype_unary(in, "round");
}
std::vector<TensorMeta> infer_exp(std::span<const TensorMeta> in, const Attrs&) {
  return float_unary(in, "exp");
}
std::vector<TensorMeta> infer_log(std::span<const TensorMeta> in, const Attrs&) {
  return float_unary(in, "log");
}
std::vector<TensorMeta> infer_sqrt(std::span<const TensorMeta> in, const Attrs&) {
  return float_unary(in, "sqrt");
}
std::vector<TensorMeta> infer_rsqrt(std::span<const TensorMeta> in, const Attrs&) {
  return float_unary(in, "rsqrt");
}
std::vector<TensorMeta> infer_sin(std::span<const TensorMeta> in, const Attrs&) {
  return float_unary(in, "sin");
}
std::vector<TensorMeta> infer_cos(std::span<const TensorMeta> in, const Attrs&) {
  return float_unary(in, "cos");
}
std::vector<TensorMeta> infer_tanh(std::span<const TensorMeta> in, const Attrs&) {
  return float_unary(in, "tanh");
}
std::vector<TensorMeta> infer_sigmoid(std::span<const TensorMeta> in, const Attrs&) {
  return float_unary(in, "sigmoid");
}
std::vector<TensorMeta> infer_erf(std::span<const TensorMeta> in, const Attrs&) {
  return float_unary(in, "erf");
}
std::vector<TensorMeta> infer_logical_not(std::span<const TensorMeta> in, const Attrs&) {
  return to_bool(in, "logical_not");
}
std::vector<TensorMeta> infer_cast(std::span<const TensorMeta> in, const Attrs& a) {
  return result(in, a.dtype(0), "cast");
}

std::vector<TensorMeta> infer_add(std::span<const TensorMeta> in, const Attrs&) {
  return arithmetic(in, "add", true);
}
std::vector<TensorMeta> infer_sub(std::span<const TensorMeta> in, const Attrs&) {
  // PyTorch refuses bool subtraction even when the other operand would promote it.
  bool a = in[0].dtype == DType::bool_, b = in[1].dtype == DType::bool_;
  KILN_CHECK(!(a && b),
             "sub: subtraction, the `-` operator, with two bool tensors is not supported; use "
             "logical_xor or logical_not instead (got ",
             operands_str(in), ")");
  KILN_CHECK(!(a || b),
             "sub: subtraction, the `-` operator, with a bool tensor is not supported; use "
             "logical_not to invert a mask (got ",
             operands_str(in), ")");
  return arithmetic(in, "sub", false);
}
std::vector<TensorMeta> infer_mul(std::span<const TensorMeta> in, const Attrs&) {
  return arithmetic(in, "mul", true);
}
std::vector<TensorMeta> infer_div(std::span<const TensorMeta> in, const Attrs&) {
  DType t = result_type(in);
  return result(in, is_floating(t) ? t : kDefaultFloat, "div");
}
std::vector<TensorMeta> infer_floor_divide(std::span<const TensorMeta> in, const Attrs&) {
  return arithmetic(in, "floor_divide", false);
}
std::vector<TensorMeta> infer_remainder(std::span<const TensorMeta> in, const Attrs&) {
  return arithmetic(in, "remainder", false);
}
std::vector<TensorMeta> infer_pow(std::span<const TensorMeta> in, const Attrs&) {
  return arithmetic(in, "pow", false);
}
std::vector<TensorMeta> infer_maximum(std::span<const TensorMeta> in, const Attrs&) {
  return arithmetic(in, "maximum", true);
}
std::vector<TensorMeta> infer_minimum(std::span<const TensorMeta> in, const Attrs&) {
  return arithmetic(in, "minimum", true);
}
std::vector<TensorMeta> infer_eq(std::span<const TensorMeta> in, const Attrs&) {
  return to_bool(in, "eq");
}
std::vector<TensorMeta> infer_ne(std::span<const TensorMeta> in, const Attrs&) {
  return to_bool(in, "ne");
}
std::vector<TensorMeta> infer_lt(std::span<const TensorMeta> in, const Attrs&) {
  return to_bool(in, "lt");
}
std::vector<TensorMeta> infer_le(std::span<const TensorMeta> in, const Attrs&) {
  return to_bool(in, "le");
}
std::vector<TensorMeta> infer_gt(std::span<const TensorMeta> in, const Attrs&) {
  return to_bool(in, "gt");
}
std::vector<TensorMeta> infer_ge(std::span<const TensorMeta> in, const Attrs&) {
  return to_bool(in, "ge");
}
std::vector<TensorMeta> infer_logical_and(std::span<const TensorMeta> in, const Attrs&) {
  return to_bool(in, "logical_and");
}
std::vector<TensorMeta> infer_logical_or(std::span<const TensorMeta> in, const Attrs&) {
  return to_bool(in, "logical_or");
}

std::vector<TensorMeta> infer_where(std::span<const TensorMeta> in, const Attrs&) {
  KILN_CHECK(in[0].dtype == DType::bool_, "where: expected a bool condition, got ", in[0].dtype,
             " with shape ", shape_str(in[0].sizes));
  DType t = result_type(in.subspan(1));
  return result(in, t, "where");
}

} // namespace kiln::ops
