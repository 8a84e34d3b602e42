// ValueNumbering: one walk over inputs and nodes.
#include "ir/numbering.h"

namespace kiln::ir {

ValueNumbering::ValueNumbering(const Graph& g) {
  int64_t next = 0;
  for (Value* v : g.inputs())
    ids_[v] = next++;
  int64_t pos = 0;
  for (Node* n : g.nodes()) {
    positions_[n] = pos++;
    for (size_t k = 0; k < n->num_outputs(); ++k)
      ids_[n->output(k)] = next++;
  }
}

} // namespace kiln::ir
