// The verifier: one linear walk over inputs, nodes, outputs and writes, checking invariants.
#include "ir/verifier.h"

#include <sstream>
#include <unordered_map>
#include <vector>

#include "ir/infer.h"
#include "ir/numbering.h"

namespace kiln::ir {
namespace {

/// A factory's or random op's result type that differs from the inferred one only in its
/// device: where a factory makes its tensor is the caller's choice (FactoryDevice), not
/// something its attributes say.
bool is_device_choice(const Node& n, const Type& inferred, const Type& actual) {
  const OpKind k = n.schema().kind;
  return (k == OpKind::factory || k == OpKind::random) &&
         Type(actual.dtype(), actual.sizes(), actual.strides(), inferred.device(),
              actual.wrapped_number()) == inferred;
}

/// A result type that differs from the inferred one only in a dense layout, on a node that
/// is no view: the layout pass chose it (channels-last). A view's strides are its meaning.
bool is_layout_choice(const Node& n, const Type& inferred, const Type& actual) {
  return n.schema().kind != OpKind::view && inferred.is_contiguous() &&
         inferred.dtype() == actual.dtype() && inferred.sizes() == actual.sizes() &&
         inferred.device() == actual.device() &&
         inferred.wrapped_number() == actual.wrapped_number() &&
         is_dense(actual.sizes(), actual.full_strides());
}

/// The state of one verification: the numbering, and the first error found.
class Verifier {
public:
  explicit Verifier(const Graph& g) : g_(g), num_(g) {}

  Expected<void> run(const Node** failed) {
    if (failed) *failed = nullptr;
    bool ok = check_inputs() && check_nodes() && check_outputs() && check_writes() && check_uses();
    if (ok) return {};
    if (failed) *failed = failed_;
    return Error::without_location(message_);
  }

private:
  std::string ref(const Value* v) const {
    int64_t id = num_[v];
    return id < 0 ? std::string("<undefined>") : detail::str("%", id);
  }
  std::string label(const Node* n) const {
    std::string s;
    for (size_t k = 0; k < n->num_outputs(); ++k)
      s += (k ? ", " : "") + ref(n->output(k));
    if (!s.empty()) s += " = ";
    s += std::string(n->name());
    return s;
  }
  template <typename... Args> bool fail_node(const Node* n, const Args&... args) {
    failed_ = n;
    message_ = label(n) + ": " + detail::str(args...);
    return false;
  }
  template <typename... Args> bool fail_graph(const Args&... args) {
    failed_ = nullptr;
    message_ = "graph @" + g_.name() + ": " + detail::str(args...);
    return false;
  }
  /// Whether v is a value of this graph (numbered by a walk over it).
  bool ours(const Value* v) const { return v && &v->graph() == &g_ && num_[v] >= 0; }

  bool check_inputs() {
    for (size_t i = 0; i < g_.num_inputs(); ++i) {
      const Value* v = g_.input(i);
      if (!v->is_input() || v->index() != i)
        return fail_graph("input ", i, " (", ref(v), ") has index ", v->index(),
                          v->is_input() ? "" : " and a producer");
      if (&v->graph() != &g_) return fail_graph("input ", i, " belongs to another graph");
      if (!v->is_constant()) continue;
      const Tensor& t = v->constant();
      const Type& ty = v->type();
      if (!t.defined()) return fail_graph("constant ", ref(v), " holds no data");
      if (t.is_traced() || !t.device().is_cpu() || !t.is_contiguous())
        return fail_graph("constant ", ref(v), " must hold a contiguous cpu tensor");
      if (t.dtype() != ty.dtype() || t.sizes() != ty.sizes())
        return fail_graph("constant ", ref(v), " has type ", ty.str(), " but holds a ",
                          Type(t.dtype(), t.sizes()).str(), " tensor");
      if (!ty.is_contiguous() || !ty.device().is_cpu())
        return fail_graph("constant ", ref(v), " has type ", ty.str(),
                          "; constants are contiguous and on the cpu");
    }
    return true;
  }

  bool check_nodes() {
    int64_t pos = 0;
    for (const Node* n : g_.nodes()) {
      if (&n->graph() != &g_) return fail_node(n, "node belongs to another graph");
      for (size_t k = 0; k < n->num_outputs(); ++k) {
        const Value* o = n->output(k);
        if (o->producer() != n || o->index() != k)
          return fail_node(n, "result ", k, " does not record this node as its producer");
      }
      if (auto ok = check_arity(n->op(), n->num_inputs()); !ok)
        return fail_node(n, ok.error().message());
      if (auto ok = check_attrs(n->op(), n->attrs()); !ok)
        return fail_node(n, ok.error().message());
      for (size_t i = 0; i < n->num_inputs(); ++i) {
        const Value* v = n->input(i);
        if (!v) return fail_node(n, "operand ", i, " is null");
        if (&v->graph() != &g_ || num_[v] < 0)
          return fail_node(n, "operand ", i, " is not a value of this graph");
        if (!v->is_input() && num_.position(v->producer()) >= pos)
          return fail_node(n, "operand ", i, " (", ref(v), ") is used before it is defined");
      }
      auto types = infer_types(n->op(), n->inputs(), n->attrs());
      if (!types) return fail_node(n, "inference fails: ", types.error().message());
      if (types->size() != n->num_outputs())
        return fail_node(n, "has ", n->num_outputs(), " results but ", n->name(), " infers ",
                         types->size());
      for (size_t k = 0; k < types->size(); ++k)
        if ((*types)[k] != n->output(k)->type() &&
            !is_layout_choice(*n, (*types)[k], n->output(k)->type()) &&
            !is_device_choice(*n, (*types)[k], n->output(k)->type()))
          return fail_node(n, "result ", k, " has type ", n->output(k)->type().str(), " but ",
                           n->name(), " infers ", (*types)[k].str());
      ++pos;
    }
    return true;
  }

  bool check_outputs() {
    for (size_t i = 0; i < g_.num_outputs(); ++i)
      if (!ours(g_.output(i))) return fail_graph("output ", i, " is not defined in this graph");
    return true;
  }

  bool check_writes() {
    for (size_t i = 0; i < g_.writes().size(); ++i) {
      const InPlaceWrite& w = g_.writes()[i];
      if (!ours(w.target)) return fail_graph("write ", i, " targets a value not of this graph");
      if (!ours(w.source))
        return fail_graph("write ", i, " has a source that is not defined in this graph");
      if (!w.target->is_input())
        return fail_graph("write ", i, " targets ", ref(w.target),
                          ", which is a node result, not a graph input");
      if (w.target->is_constant())
        return fail_graph("write ", i, " targets ", ref(w.target), ", which is a constant");
      const Type& t = w.target->type();
      const Type& s = w.source->type();
      if (t.dtype() != s.dtype() || t.sizes() != s.sizes() || t.device() != s.device())
        return fail_graph("write ", i, " stores ", ref(w.source), " of type ", s.str(), " into ",
                          ref(w.target), " of type ", t.str());
    }
    return true;
  }

  /// Every use recorded on a value points back at it, and every operand, output and write
  /// has exactly one recorded use (counts match and no use is recorded twice).
  bool check_uses() {
    // Offsets of each node's operands in one flat array of "seen" flags.
    std::unordered_map<const Node*, size_t> offset; // lookups only, never iterated
    size_t total = 0;
    for (const Node* n : g_.nodes()) {
      offset[n] = total;
      total += n->num_inputs();
    }
    std::vector<char> seen_operand(total, 0);
    std::vector<char> seen_output(g_.num_outputs(), 0);
    std::vector<char> seen_source(g_.writes().size(), 0), seen_target(g_.writes().size(), 0);
    size_t count = 0;
    auto check_value = [&](const Value* v) -> bool {
      for (const Use& u : v->uses()) {
        ++count;
        bool back = false;
        char* seen = nullptr;
        switch (u.kind) {
        case Use::Kind::operand: {
          auto it = u.user ? offset.find(u.user) : offset.end();
          if (it != offset.end() && u.slot < u.user->num_inputs()) {
            back = u.user->input(u.slot) == v;
            seen = &seen_operand[it->second + u.slot];
          }
          break;
        }
        case Use::Kind::graph_output:
          if (u.slot < g_.num_outputs()) {
            back = g_.output(u.slot) == v;
            seen = &seen_output[u.slot];
          }
          break;
        case Use::Kind::write_source:
          if (u.slot < g_.writes().size()) {
            back = g_.writes()[u.slot].source == v;
            seen = &seen_source[u.slot];
          }
          break;
        case Use::Kind::write_target:
          if (u.slot < g_.writes().size()) {
            back = g_.writes()[u.slot].target == v;
            seen = &seen_target[u.slot];
          }
          break;
        }
        if (!back || *seen) {
          if (u.kind == Use::Kind::operand && u.user && offset.count(u.user))
            return fail_node(u.user, "use list of ", ref(v), " disagrees with operand ", u.slot);
          return fail_graph("use list of ", ref(v), " has a stale or duplicate entry");
        }
        *seen = 1;
      }
      return true;
    };
    for (const Value* v : g_.inputs())
      if (!check_value(v)) return false;
    for (const Node* n : g_.nodes())
      for (size_t k = 0; k < n->num_outputs(); ++k)
        if (!check_value(n->output(k))) return false;
    size_t expected = total + g_.num_outputs() + 2 * g_.writes().size();
    if (count != expected) {
      for (const Node* n : g_.nodes())
        for (size_t i = 0; i < n->num_inputs(); ++i)
          if (!seen_operand[offset[n] + i])
            return fail_node(n, "operand ", i, " (", ref(n->input(i)),
                             ") is missing from its use list");
      return fail_graph("an output or write is missing from its value's use list");
    }
    return true;
  }

  const Graph& g_;
  ValueNumbering num_;
  const Node* failed_ = nullptr;
  std::string message_;
};

} // namespace

Expected<void> verify(const Graph& g, const Node** failed) { return Verifier(g).run(failed); }

} // namespace kiln::ir
