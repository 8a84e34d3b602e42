// constant-fold: evaluates nodes of constant operands with the eager kernels.
#include <vector>

#include "ir/graph.h"
#include "passes/aliasing.h"
#include "passes/passes.h"
#include "runtime/ops/dispatch.h"

namespace kiln::passes {

namespace {

/// Whether n may be folded, judged from its op, operands and result sizes only.
bool foldable(const ir::Node* n) {
  const OpKind kind = n->schema().kind;
  // Random ops are draws, `empty` has no value, views alias their operand; factories without
  // operands are as small as the constant they would become.
  if (kind == OpKind::random || kind == OpKind::view || n->op() == Op::empty) return false;
  if (n->num_inputs() == 0) return false;
  for (ir::Value* v : n->inputs())
    if (!v->is_constant()) return false;
  for (size_t k = 0; k < n->num_outputs(); ++k) {
    const ir::Type& t = n->output(k)->type();
    if (!t.is_static() || t.numel() > kMaxFoldedElements) return false;
    // A constant returned as an output would hand the caller the graph's own storage, which
    // every later call reuses: a fresh result stays fresh.
    if (is_graph_output(n->output(k))) return false;
  }
  return true;
}

/// The node's results computed by the eager kernel, or empty when the kernel refuses the
/// operands (the graph then fails at run time, as eager code does).
std::vector<Tensor> evaluate(const ir::Node* n) {
  std::vector<Tensor> args;
  args.reserve(n->num_inputs());
  for (ir::Value* v : n->inputs())
    args.push_back(v->constant());
  try {
    return dispatch(n->op(), args, n->attrs());
  } catch (const Error&) {
    return {};
  }
}

} // namespace

Expected<void> constant_fold(ir::Graph& g, PassContext& ctx) {
  for (ir::Node* n = g.first_node(); n;) {
    ir::Node* next = n->next();
    if (!foldable(n)) {
      n = next;
      continue;
    }
    std::vector<Tensor> results = evaluate(n);
    bool same_types = results.size() == n->num_outputs();
    for (size_t k = 0; same_types && k < results.size(); ++k) {
      ir::Type t(results[k].dtype(), results[k].sizes(), {}, Device::cpu(), false);
      same_types = results[k].device().is_cpu() && t == n->output(k)->type();
    }
    if (same_types) {
      for (size_t k = 0; k < results.size(); ++k)
        n->output(k)->replace_all_uses_with(g.add_constant(results[k]));
      g.erase(n);
      ctx.changed = true;
    }
    n = next;
  }
  return {};
}

} // namespace kiln::passes
