// The verifier: the invariants every graph must satisfy between passes.
#pragma once

#include "ir/graph.h"
#include "runtime/error.h"

namespace kiln::ir {

/// Checks that every operand is defined earlier in the graph (or is a graph input of this
/// graph), that arity and attributes match the op's schema, that every result type equals
/// what the op's inference gives, that outputs and writes are defined and well-typed, that
/// constants hold data of their type, and that use lists agree with the operands. The first
/// violation is returned; its message names the node as the printer numbers it
/// ("%7 = add: ..."). When `failed` is given, it receives the node the error is about (null
/// for graph-level errors), so that tools can point at the node's line in a .kir file.
Expected<void> verify(const Graph& g, const Node** failed = nullptr);

} // namespace kiln::ir
