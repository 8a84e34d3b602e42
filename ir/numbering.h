// ValueNumbering: the %N names of a graph's values, in order (inputs first, then results).
#pragma once

#include <cstdint>
#include <unordered_map>

#include "ir/graph.h"

namespace kiln::ir {

/// Numbers every value of a graph as the printer does: inputs 0..n-1, then node results in
/// node order. The printer, the verifier's messages and the structural hash all use it, so
/// "%7" means the same value everywhere. Lookups only; never iterated.
class ValueNumbering {
public:
  explicit ValueNumbering(const Graph& g);
  /// The number of v, or -1 when v is not (yet) numbered, e.g. a value of another graph.
  int64_t operator[](const Value* v) const {
    auto it = ids_.find(v);
    return it == ids_.end() ? -1 : it->second;
  }
  /// The position of a node in the graph's order.
  int64_t position(const Node* n) const {
    auto it = positions_.find(n);
    return it == positions_.end() ? -1 : it->second;
  }
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }

private:
  std::unordered_map<const Value*, int64_t> ids_;
  std::unordered_map<const Node*, int64_t> positions_;
};

} // namespace kiln::ir
