// The MLIR emitter shared by ir/mlir.cpp (module, constants, helpers) and ir/mlir_ops.cpp
// (one lowering per op). Private to to_mlir.
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

/// A tensor operand of a generic: SSA name, sizes and element dtype.
struct Operand {
  std::string name;
  Shape sizes;
  DType dtype;
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

} // namespace kiln::ir::mlir
