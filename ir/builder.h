// Builder: creates nodes at an insertion point, with result types from the op's inference.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

/// Appends (or inserts) nodes into a graph. Every node it creates has the result types the
/// op's inference gives, so a graph built only through a Builder verifies by construction.
/// Bad operands or attributes throw kiln::Error naming the op and the shapes.
class Builder {
public:
  explicit Builder(Graph& g) : g_(&g) {}
  Graph& graph() const { return *g_; }

  /// New nodes go before `n`; null (the default) appends at the end.
  void set_insertion_point(Node* before) { before_ = before; }
  /// The source location given to the nodes created from now on.
  void set_location(std::string loc) { location_ = std::move(loc); }

  Node* create_node(Op op, std::vector<Value*> inputs, Attrs attrs = {});
  /// create_node for single-result ops: the result.
  Value* create(Op op, std::vector<Value*> inputs, Attrs attrs = {});

  /// A constant input holding a copy of t.
  Value* constant(const Tensor& t) { return g_->add_constant(t); }
  /// A wrapped-number constant (the IR form of a C++ scalar operand such as the 2 in x * 2).
  Value* scalar(Scalar s);

private:
  Graph* g_;
  Node* before_ = nullptr;
  std::string location_;
};

} // namespace kiln::ir
