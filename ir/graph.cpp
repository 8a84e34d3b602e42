// Graph, Node and Value: ownership, the node list, and use-list bookkeeping.
#include "ir/graph.h"

#include <algorithm>
#include <unordered_map>

#include "runtime/error.h"
#include "runtime/tensor_impl.h"

namespace kiln::ir {

std::string_view input_kind_name(InputKind k) {
  switch (k) {
  case InputKind::user: return "input";
  case InputKind::parameter: return "param";
  case InputKind::constant: return "const";
  }
  return "?";
}

// ---- Value ----

size_t Value::num_operand_uses() const {
  return static_cast<size_t>(std::count_if(
      uses_.begin(), uses_.end(), [](const Use& u) { return u.kind == Use::Kind::operand; }));
}

void Value::remove_use(Use u) {
  auto it = std::find(uses_.begin(), uses_.end(), u);
  KILN_ASSERT(it != uses_.end(), "use list out of sync: use not found");
  uses_.erase(it);
}

void Value::replace_all_uses_with(Value* other) {
  KILN_ASSERT(other != nullptr && &other->graph() == graph_,
              "replace_all_uses_with: another graph");
  if (other == this) return;
  std::vector<Use> uses = std::move(uses_);
  uses_.clear();
  for (const Use& u : uses)
    graph_->retarget_use(u, other);
}

// ---- Node ----

void Node::set_input(size_t i, Value* v) {
  KILN_ASSERT(i < inputs_.size(), "set_input: operand ", i, " of ", name(), " out of range");
  KILN_ASSERT(&v->graph() == graph_, "set_input: value of another graph");
  Use u{this, static_cast<uint32_t>(i), Use::Kind::operand};
  inputs_[i]->remove_use(u);
  inputs_[i] = v;
  v->add_use(u);
}

std::vector<Value*> Node::outputs() const {
  std::vector<Value*> r;
  r.reserve(outputs_.size());
  for (const auto& v : outputs_)
    r.push_back(v.get());
  return r;
}

// ---- Graph ----

Graph::~Graph() {
  for (Node* n = first_; n;) {
    Node* next = n->next_;
    delete n;
    n = next;
  }
}

Value* Graph::add_input(Type type, InputKind kind, std::string name) {
  KILN_ASSERT(kind != InputKind::constant, "add_input: use add_constant for constants");
  auto v = std::unique_ptr<Value>(
      new Value(this, std::move(type), nullptr, static_cast<uint32_t>(inputs_.size())));
  v->input_kind_ = kind;
  v->name_ = std::move(name);
  input_ptrs_.push_back(v.get());
  inputs_.push_back(std::move(v));
  return input_ptrs_.back();
}

Value* Graph::add_constant(const Tensor& data, bool wrapped_number, std::string name) {
  KILN_ASSERT(data.defined() && !data.is_traced() && data.device().is_cpu(),
              "add_constant: needs a concrete CPU tensor");
  KILN_ASSERT(!wrapped_number || data.dim() == 0, "add_constant: a wrapped number must be 0-d");
  // A private contiguous copy: the graph's constants never change under it. A wrapped
  // number (a C++ scalar operand, made by wrap_scalar) is private already: nothing else
  // holds it or writes it, so it is adopted as it is.
  Tensor copy = data.impl().wrapped_number && wrapped_number ? data
                : data.is_contiguous()                       ? data.clone()
                                                             : data.contiguous();
  if (!copy.is_same(data)) copy.impl().wrapped_number = wrapped_number;
  auto v = std::unique_ptr<Value>(
      new Value(this, Type(copy.dtype(), copy.sizes(), {}, Device::cpu(), wrapped_number), nullptr,
                static_cast<uint32_t>(inputs_.size())));
  v->input_kind_ = InputKind::constant;
  v->name_ = std::move(name);
  v->constant_ = std::move(copy);
  input_ptrs_.push_back(v.get());
  inputs_.push_back(std::move(v));
  return input_ptrs_.back();
}

void Graph::erase_input(Value* v) {
  KILN_ASSERT(v->is_input() && &v->graph() == this, "erase_input: not an input of this graph");
  KILN_ASSERT(!v->has_uses(), "erase_input: input %", v->index(), " still has ", v->uses().size(),
              " uses");
  size_t at = v->index();
  inputs_.erase(inputs_.begin() + static_cast<std::ptrdiff_t>(at));
  input_ptrs_.erase(input_ptrs_.begin() + static_cast<std::ptrdiff_t>(at));
  for (size_t i = at; i < input_ptrs_.size(); ++i)
    input_ptrs_[i]->index_ = static_cast<uint32_t>(i);
}

Node* Graph::create_node(Op op, std::vector<Value*> inputs, Attrs attrs,
                         std::span<const Type> types, Node* before) {
  KILN_ASSERT(!before || &before->graph() == this, "create_node: insertion point in another graph");
  Node* n = new Node(this, op, std::move(inputs), std::move(attrs));
  for (size_t i = 0; i < n->inputs_.size(); ++i) {
    Value* in = n->inputs_[i];
    KILN_ASSERT(in != nullptr && &in->graph() == this, "create_node: operand ", i, " of ",
                op_name(op), " is null or of another graph");
    in->add_use({n, static_cast<uint32_t>(i), Use::Kind::operand});
  }
  n->outputs_.reserve(types.size());
  for (size_t k = 0; k < types.size(); ++k)
    n->outputs_.push_back(
        std::unique_ptr<Value>(new Value(this, types[k], n, static_cast<uint32_t>(k))));
  // Link into the list.
  Node* after = before ? before->prev_ : last_;
  n->prev_ = after;
  n->next_ = before;
  (after ? after->next_ : first_) = n;
  (before ? before->prev_ : last_) = n;
  ++num_nodes_;
  return n;
}

void Graph::erase(Node* n) {
  KILN_ASSERT(&n->graph() == this, "erase: node of another graph");
  for (const auto& out : n->outputs_)
    KILN_ASSERT(!out->has_uses(), "erase: output ", out->index(), " of ", n->name(), " still has ",
                out->uses().size(), " uses");
  for (size_t i = 0; i < n->inputs_.size(); ++i)
    n->inputs_[i]->remove_use({n, static_cast<uint32_t>(i), Use::Kind::operand});
  (n->prev_ ? n->prev_->next_ : first_) = n->next_;
  (n->next_ ? n->next_->prev_ : last_) = n->prev_;
  --num_nodes_;
  delete n;
}

void Graph::move_before(Node* n, Node* before) {
  KILN_ASSERT(n != before, "move_before: a node cannot move before itself");
  (n->prev_ ? n->prev_->next_ : first_) = n->next_;
  (n->next_ ? n->next_->prev_ : last_) = n->prev_;
  Node* after = before ? before->prev_ : last_;
  n->prev_ = after;
  n->next_ = before;
  (after ? after->next_ : first_) = n;
  (before ? before->prev_ : last_) = n;
}

std::vector<Node*> Graph::node_list() const {
  std::vector<Node*> r;
  r.reserve(num_nodes_);
  for (Node* n = first_; n; n = n->next_)
    r.push_back(n);
  return r;
}

void Graph::add_output(Value* v) {
  KILN_ASSERT(&v->graph() == this, "add_output: value of another graph");
  v->add_use({nullptr, static_cast<uint32_t>(outputs_.size()), Use::Kind::graph_output});
  outputs_.push_back(v);
}

void Graph::set_output(size_t i, Value* v) {
  KILN_ASSERT(i < outputs_.size() && &v->graph() == this, "set_output: bad index or graph");
  Use u{nullptr, static_cast<uint32_t>(i), Use::Kind::graph_output};
  outputs_[i]->remove_use(u);
  outputs_[i] = v;
  v->add_use(u);
}

void Graph::add_write(Value* target, Value* source) {
  KILN_ASSERT(&target->graph() == this && &source->graph() == this, "add_write: another graph");
  auto slot = static_cast<uint32_t>(writes_.size());
  target->add_use({nullptr, slot, Use::Kind::write_target});
  source->add_use({nullptr, slot, Use::Kind::write_source});
  writes_.push_back({target, source});
}

void Graph::retarget_use(const Use& u, Value* to) {
  switch (u.kind) {
  case Use::Kind::operand: u.user->inputs_[u.slot] = to; break;
  case Use::Kind::graph_output: outputs_[u.slot] = to; break;
  case Use::Kind::write_source: writes_[u.slot].source = to; break;
  case Use::Kind::write_target: writes_[u.slot].target = to; break;
  }
  to->add_use(u);
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>(name_);
  std::unordered_map<const Value*, Value*> map; // lookups only, never iterated
  for (Value* in : input_ptrs_) {
    Value* c = nullptr;
    if (in->is_constant()) {
      auto v = std::unique_ptr<Value>(new Value(g.get(), in->type(), nullptr, in->index()));
      v->input_kind_ = InputKind::constant;
      v->name_ = in->name();
      v->constant_ = in->constant(); // immutable: shared
      c = v.get();
      g->input_ptrs_.push_back(c);
      g->inputs_.push_back(std::move(v));
    } else {
      c = g->add_input(in->type(), in->input_kind(), in->name());
    }
    map[in] = c;
  }
  for (Node* n = first_; n; n = n->next_) {
    std::vector<Value*> ins;
    ins.reserve(n->inputs_.size());
    for (Value* v : n->inputs_)
      ins.push_back(map.at(v));
    std::vector<Type> types;
    for (const auto& o : n->outputs_)
      types.push_back(o->type());
    Node* c = g->create_node(n->op_, std::move(ins), n->attrs_, types);
    c->location_ = n->location_;
    for (size_t k = 0; k < types.size(); ++k)
      map[n->output(k)] = c->output(k);
  }
  for (Value* v : outputs_)
    g->add_output(map.at(v));
  for (const InPlaceWrite& w : writes_)
    g->add_write(map.at(w.target), map.at(w.source));
  return g;
}

} // namespace kiln::ir
