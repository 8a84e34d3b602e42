// constant-fold: evaluates nodes of constant inputs with the eager kernels.
#include <optional>

#include "passes/passes.h"
#include "runtime/ops/dispatch.h"

namespace kiln::passes {

namespace {

bool is_graph_output(const ir::Value* v) {
  for (const ir::Use& u : v->uses())
    if (u.kind == ir::Use::Kind::graph_output) return true;
  return false;
}

bool foldable(const ir::Node* n) {
  const OpKind kind = n->schema().kind;
  if (kind == OpKind::random || kind == OpKind::view || n->op() == Op::empty) return false;
  if (n->num_inputs() == 0) return false;
  for (ir::Value* in : n->inputs())
    if (!in->is_constant()) return false;
  for (size_t k = 0; k < n->num_outputs(); ++k) {
    const ir::Type& t = n->output(k)->type();
    if (!t.is_static() || t.numel() > kMaxFoldedElements) return false;
    // A graph output that became a constant input would hand the caller the graph's own
    // constant storage.
    if (is_graph_output(n->output(k))) return false;
  }
  return true;
}

/// The node's results computed by the eager kernel, or nothing when the kernel refuses
/// (kiln::Error, e.g. integer division by zero) or a result would not keep its type.
std::optional<std::vector<Tensor>> evaluate(const ir::Node* n) {
  std::vector<Tensor> operands;
  operands.reserve(n->num_inputs());
  for (ir::Value* in : n->inputs())
    operands.push_back(in->constant());
  std::vector<Tensor> results;
  try {
    results = dispatch(n->op(), operands, n->attrs());
  } catch (const Error&) {
    return std::nullopt;
  }
  if (results.size() != n->num_outputs()) return std::nullopt;
  for (size_t k = 0; k < results.size(); ++k) {
    const Tensor& t = results[k];
    const ir::Type& old = n->output(k)->type();
    if (!t.defined() || !t.device().is_cpu()) return std::nullopt;
    bool wrapped = old.wrapped_number() && t.dim() == 0;
    // The type the new constant input will have (Graph::add_constant: contiguous, CPU).
    if (ir::Type(t.dtype(), t.sizes(), {}, Device::cpu(), wrapped) != old) return std::nullopt;
  }
  return results;
}

} // namespace

Expected<void> constant_fold(ir::Graph& g, PassContext& ctx) {
  // Forward: a folded node's users see constant operands when they are reached.
  for (ir::Node* n = g.first_node(); n;) {
    ir::Node* next = n->next();
    if (foldable(n)) {
      if (std::optional<std::vector<Tensor>> results = evaluate(n)) {
        for (size_t k = 0; k < results->size(); ++k) {
          ir::Value* c = g.add_constant((*results)[k], n->output(k)->type().wrapped_number());
          n->output(k)->replace_all_uses_with(c);
        }
        g.erase(n);
        ctx.changed = true;
      }
    }
    n = next;
  }
  return {};
}

} // namespace kiln::passes
