// Value: an SSA value of a graph (a graph input or a node output) and its use list.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/type.h"
#include "runtime/tensor.h"

namespace kiln::ir {

class Graph;
class Node;

/// Where a value is read: operand `slot` of node `user`, or, when user is null, a use by the
/// graph itself (kind says which: output #slot, or in-place write #slot).
struct Use {
  enum class Kind : uint8_t { operand, graph_output, write_source, write_target };
  Node* user = nullptr;
  uint32_t slot = 0;
  Kind kind = Kind::operand;
  friend bool operator==(const Use&, const Use&) = default;
};

/// What a graph input stands for: an argument of the user's function, a parameter or buffer
/// of a module (bound by identity at run time), or a constant whose data the graph holds.
enum class InputKind : uint8_t { user, parameter, constant };
std::string_view input_kind_name(InputKind k);

/// An SSA value. Defined exactly once: by a graph input or as output `index()` of its
/// producer node. Owned by the graph (inputs) or by the producing node (outputs).
class Value {
public:
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;

  const Type& type() const { return type_; }
  /// Changes the type in place; passes that do so must keep the graph verifiable.
  void set_type(Type t) { type_ = std::move(t); }
  Graph& graph() const { return *graph_; }

  /// The defining node, or null for a graph input.
  Node* producer() const { return producer_; }
  bool is_input() const { return producer_ == nullptr; }
  /// Output index in the producer, or position among the graph's inputs.
  uint32_t index() const { return index_; }

  // Graph inputs only.
  InputKind input_kind() const { return input_kind_; }
  bool is_constant() const { return is_input() && input_kind_ == InputKind::constant; }
  /// The input's name: the argument or parameter name ("x", "fc1.weight"); may be empty.
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  /// The data of a constant input (a contiguous CPU tensor of the value's type).
  const Tensor& constant() const { return constant_; }

  std::span<const Use> uses() const { return uses_; }
  bool has_uses() const { return !uses_.empty(); }
  /// Number of node operands reading this value (graph outputs and writes excluded).
  size_t num_operand_uses() const;
  /// Points every use of this value (node operands, graph outputs, writes) at `other`.
  void replace_all_uses_with(Value* other);

private:
  friend class Graph;
  friend class Node;
  Value(Graph* g, Type t, Node* producer, uint32_t index)
      : graph_(g), producer_(producer), index_(index), type_(std::move(t)) {}
  void add_use(Use u) { uses_.push_back(u); }
  void remove_use(Use u);

  Graph* graph_;
  Node* producer_;
  uint32_t index_;
  Type type_;
  std::vector<Use> uses_;
  InputKind input_kind_ = InputKind::user;
  std::string name_;
  Tensor constant_;
};

} // namespace kiln::ir
