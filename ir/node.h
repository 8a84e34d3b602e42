// Node: one op of a graph: an op from the runtime's op table, operands, attributes, results.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/value.h"
#include "runtime/ops/op.h"

namespace kiln::ir {

/// One operation. Its operands are values defined earlier in the graph; it defines its
/// outputs. Attributes are the op's schema attributes, in schema order (runtime Attrs, so
/// the eager kernels run a node as it is). Created and destroyed only through Graph.
class Node {
public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  Op op() const { return op_; }
  const OpSchema& schema() const { return kiln::schema(op_); }
  std::string_view name() const { return op_name(op_); }
  Graph& graph() const { return *graph_; }

  std::span<Value* const> inputs() const { return inputs_; }
  Value* input(size_t i) const { return inputs_.at(i); }
  size_t num_inputs() const { return inputs_.size(); }
  /// Replaces operand i, keeping both use lists right.
  void set_input(size_t i, Value* v);

  size_t num_outputs() const { return outputs_.size(); }
  Value* output(size_t i = 0) const { return outputs_.at(i).get(); }
  std::vector<Value*> outputs() const;

  const Attrs& attrs() const { return attrs_; }

  /// The user's source location ("model.cpp:42"), or empty.
  const std::string& location() const { return location_; }
  void set_location(std::string loc) { location_ = std::move(loc); }

  /// Neighbours in the graph's node order (null at the ends).
  Node* prev() const { return prev_; }
  Node* next() const { return next_; }

private:
  friend class Graph;
  Node(Graph* g, Op op, std::vector<Value*> inputs, Attrs attrs)
      : graph_(g), op_(op), inputs_(std::move(inputs)), attrs_(std::move(attrs)) {}

  Graph* graph_;
  Op op_;
  std::vector<Value*> inputs_;
  std::vector<std::unique_ptr<Value>> outputs_;
  Attrs attrs_;
  std::string location_;
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
};

} // namespace kiln::ir
