// Storage roots and graph-output checks shared by the rewriting passes.
#include "passes/aliasing.h"

#include "ir/node.h"

namespace kiln::passes {

const ir::Value* storage_root(const ir::Value* v) {
  while (v->producer() && v->producer()->schema().kind == OpKind::view)
    v = v->producer()->input(0);
  return v;
}

bool is_graph_output(const ir::Value* v) {
  for (const ir::Use& u : v->uses())
    if (u.kind == ir::Use::Kind::graph_output) return true;
  return false;
}

} // namespace kiln::passes
