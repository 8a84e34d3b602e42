// Graphviz output of a graph (`kiln dump --format dot`).
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::ir {

/// The graph as a Graphviz digraph: a node per input and op (labelled with op, attributes
/// and result types), an edge per use, outputs and writes marked. Deterministic.
std::string to_dot(const Graph& g);

} // namespace kiln::ir
