// The MLIR emitter shared by ir/mlir.cpp (module, constants, helpers) and the per-family
// lowerings (ir/mlir_pointwise.cpp, mlir_reduction.cpp, mlir_conv.cpp, mlir_ops.cpp).
// Private to to_mlir.
#pragma once

#include <functional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/numbering.h"

namespace kiln::ir::mlir {

/// The MLIR element type of a dtype (bool is i1; u8 is the signless i8).
std::string elem(DType t);
/// `tensor<8x4xf32>`, `tensor<f32>` for 0-d.
std::string tensor_type(const Shape& sizes, DType t);
std::string tensor_type(const Type& t);
/// A float literal MLIR parses back to the same value of dtype t (hex for nan and inf).
std::string float_literal(double d, DType t);

/// `arith.constant LITERAL : TYPE` (no type after the i1 literals true and false).
std::string constant_op(const std::string& literal, DType t);

/// The dtype arithmetic happens in: t, with f16/bf16 widened to f32 (as the eager kernels).
DType compute_dtype(DType t);
/// The identity of a max (or min) reduction in dtype t: -inf/+inf, the integer min/max,
/// false/true.
std::string extremum_init(bool max, DType t);
/// `1, 2, 3`.
std::string ints_list(const std::vector<int64_t>& v);

/// A tensor operand of a generic: SSA name, sizes, element dtype, and its indexing map
/// (empty: the numpy broadcast map onto the loop space).
struct Operand {
  std::string name;
  Shape sizes;
  DType dtype;
  std::string map = {};
};

/// Emits the body of one func.func: value names, temporaries, and external declarations.
class Emitter {
public:
  explicit Emitter(const Graph& g);
  /// The whole module.
  std::string run();

  // ---- used by the op lowerings ----
  using BodyFn = std::function<std::string(const std::vector<std::string>& elems)>;
  std::string fresh();
  void line(const std::string& text);
  std::string name(const Value* v) const;
  void bind(const Value* v, std::string mlir_name);
  std::string empty(const Shape& sizes, DType t);
  std::string filled(const Shape& sizes, DType t, const std::string& scalar_literal);
  static std::string scalar_literal(double value, DType t);
  /// The indexing map reading an operand of sizes `in` broadcast to `out` (numpy rules).
  static std::string broadcast_map(const Shape& in, const Shape& out, size_t loops);
  /// An all-parallel linalg.generic over out_sizes reading the operands broadcast; body
  /// gets the element block arguments (operands, then the output) and returns the yield.
  std::string generic(std::span<const Operand> ins, const Shape& out_sizes, DType out_t,
                      const BodyFn& body, const std::string& init = "");
  /// One op inside a region body: `%t = TEXT : TYPE`.
  std::string op(const std::string& text, const std::string& type);
  /// Converts an element between dtypes inside a region body.
  std::string convert(const std::string& v, DType from, DType to);
  /// A call to a declared external function @kiln.<op> with the node's result types.
  std::string external(const Node& n, std::span<const std::string> operands,
                       std::span<const Type> operand_types);
  static std::string attr_mlir(const AttrValue& a);

private:
  void lower(const Node& n);
  std::string constant(const Value& v);

  const Graph& g_;
  ValueNumbering num_;
  std::vector<std::string> names_;
  std::ostringstream body_;
  int64_t next_temp_ = 0;
  std::vector<std::pair<std::string, std::string>> decls_; // symbol, signature; in order
};

/// The node's operands as generic operands.
std::vector<Operand> operands_of(const Emitter& e, const Node& n);
/// v (of sizes `in`, dtype t) reshaped to `to`: collapse to 1-d, then expand.
std::string reshape(Emitter& e, const std::string& v, const Shape& in, const Shape& to, DType t);
/// A whole tensor converted between dtypes (one generic); v itself when they agree.
std::string convert_tensor(Emitter& e, const std::string& v, const Shape& sizes, DType from,
                           DType to);

// The lowerings by family. Each binds the node's results; the bool ones return false when the
// node has no linalg form here, and the caller emits an external call instead.
/// Every OpKind::pointwise op (ir/mlir_pointwise.cpp).
void lower_pointwise(Emitter& e, const Node& n);
/// sum, prod, amax, amin, argmax, argmin (ir/mlir_reduction.cpp).
void lower_reduction(Emitter& e, const Node& n);
/// conv2d, max_pool2d, avg_pool2d (ir/mlir_conv.cpp).
bool lower_conv_pool(Emitter& e, const Node& n);

} // namespace kiln::ir::mlir
