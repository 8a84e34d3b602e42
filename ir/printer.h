// The .kir text printer: deterministic, one line per input, node, write and return.
#pragma once

#include <iosfwd>
#include <string>

#include "ir/graph.h"

namespace kiln::ir {

/// Prints g in the text format of docs/ir.md. Values are numbered in order (ValueNumbering);
/// the output depends only on the graph's structure, never on addresses.
void print(std::ostream& os, const Graph& g);
std::string print(const Graph& g);

} // namespace kiln::ir
