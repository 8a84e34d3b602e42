// Graph: inputs, nodes in topological order, outputs, and the writes into inputs it performs.
//
// Semantics. A graph is a pure function of its inputs except for its in-place writes: after
// every node has run and the outputs are taken, write k copies the value `source` into the
// storage of graph input `target`, for k = 0, 1, ... in order (the frontend records them so
// that a compiled call has the same effect on arguments and module buffers as eager code).
// Nodes read inputs as they were when the call began. Views in the graph alias only values
// of the graph: a node never sees a write.
#pragma once

#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/node.h"
#include "ir/value.h"

namespace kiln::ir {

/// An in-place write the graph performs at its end: target (a user or parameter input)
/// receives source's data.
struct InPlaceWrite {
  Value* target;
  Value* source;
};

class Graph {
public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  // ---- inputs ----
  /// Appends a user or parameter input.
  Value* add_input(Type type, InputKind kind = InputKind::user, std::string name = "");
  /// Appends a constant input holding `data` (copied to a contiguous CPU tensor); its type is
  /// data's dtype and sizes, contiguous; wrapped_number marks a scalar operand (0-d only).
  Value* add_constant(const Tensor& data, bool wrapped_number = false, std::string name = "");
  std::span<Value* const> inputs() const { return input_ptrs_; }
  Value* input(size_t i) const { return input_ptrs_.at(i); }
  size_t num_inputs() const { return input_ptrs_.size(); }
  /// Removes an input that has no uses; later inputs are renumbered.
  void erase_input(Value* v);

  // ---- nodes ----
  /// Creates a node with results of the given types, inserted before `before` (or at the
  /// end when null). The caller is responsible for the types; Builder infers them.
  Node* create_node(Op op, std::vector<Value*> inputs, Attrs attrs, std::span<const Type> types,
                    Node* before = nullptr);
  /// Destroys a node; asserts that none of its outputs has a use.
  void erase(Node* n);
  /// Moves n to just before `before` (or to the end when null).
  void move_before(Node* n, Node* before);
  Node* first_node() const { return first_; }
  Node* last_node() const { return last_; }
  size_t num_nodes() const { return num_nodes_; }

  class NodeIterator {
  public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Node*;
    using difference_type = std::ptrdiff_t;
    using pointer = Node**;
    using reference = Node*;
    explicit NodeIterator(Node* n = nullptr) : n_(n) {}
    Node* operator*() const { return n_; }
    NodeIterator& operator++() {
      n_ = n_->next();
      return *this;
    }
    NodeIterator operator++(int) {
      NodeIterator t = *this;
      ++*this;
      return t;
    }
    friend bool operator==(NodeIterator a, NodeIterator b) { return a.n_ == b.n_; }

  private:
    Node* n_;
  };
  struct NodeRange {
    Node* first;
    NodeIterator begin() const { return NodeIterator(first); }
    NodeIterator end() const { return NodeIterator(nullptr); }
  };
  /// The nodes in order. Erasing the current node while iterating invalidates the iterator:
  /// take `n->next()` first, or iterate over `node_list()`.
  NodeRange nodes() const { return {first_}; }
  /// A snapshot of the nodes in order.
  std::vector<Node*> node_list() const;

  // ---- outputs and writes ----
  void add_output(Value* v);
  void set_output(size_t i, Value* v);
  std::span<Value* const> outputs() const { return outputs_; }
  Value* output(size_t i) const { return outputs_.at(i); }
  size_t num_outputs() const { return outputs_.size(); }

  void add_write(Value* target, Value* source);
  std::span<const InPlaceWrite> writes() const { return writes_; }

  /// A deep copy (constants share their data, which is immutable).
  std::unique_ptr<Graph> clone() const;

private:
  friend class Value;
  friend class Node;
  void retarget_use(const Use& u, Value* to);

  std::string name_;
  std::vector<std::unique_ptr<Value>> inputs_;
  std::vector<Value*> input_ptrs_;
  Node* first_ = nullptr;
  Node* last_ = nullptr;
  size_t num_nodes_ = 0;
  std::vector<Value*> outputs_;
  std::vector<InPlaceWrite> writes_;
};

} // namespace kiln::ir
