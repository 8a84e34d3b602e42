// dead-code-elimination: removes unused nodes (transitively) and unused constant inputs.
#include "passes/passes.h"

namespace kiln::passes {

namespace {

bool is_dead(const ir::Node* n) {
  for (size_t k = 0; k < n->num_outputs(); ++k)
    if (n->output(k)->has_uses()) return false;
  return true;
}

} // namespace

Expected<void> dead_code_elimination(ir::Graph& g, PassContext& ctx) {
  // Backwards: every user of a node comes after it, so by the time a node is reached all of
  // its users that were dead are gone already.
  for (ir::Node* n = g.last_node(); n;) {
    ir::Node* prev = n->prev();
    if (is_dead(n)) {
      g.erase(n);
      ctx.changed = true;
    }
    n = prev;
  }
  // Constants only: user and parameter inputs are the signature, used or not.
  std::vector<ir::Value*> unused;
  for (ir::Value* in : g.inputs())
    if (in->is_constant() && !in->has_uses()) unused.push_back(in);
  for (ir::Value* in : unused)
    g.erase_input(in);
  if (!unused.empty()) ctx.changed = true;
  return {};
}

} // namespace kiln::passes
