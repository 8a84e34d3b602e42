// Every graph pass, declared together, each with what it requires and guarantees.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// dead-code-elimination: removes nodes none of whose results reaches a graph output or a
/// write, and constant inputs that nothing uses. Requires a verified graph; keeps every
/// user and parameter input (they are the signature). Random ops are removed like any
/// other when dead: their (seed, offset) inputs, not their execution, fix the stream.
Expected<void> dead_code_elimination(ir::Graph& g, PassContext& ctx);

/// common-subexpression-elimination: replaces a node with an earlier node of the same op,
/// attributes and operands (and so the same result types), and merges constant inputs with
/// equal type and bytes. Random and factory-`empty` nodes are never merged: two draws are
/// two different values. Leaves the replaced nodes dead; run dead-code-elimination after.
Expected<void> common_subexpression_elimination(ir::Graph& g, PassContext& ctx);

/// constant-fold: runs a node whose operands are all constants with the eager kernel and
/// replaces its results with new constants. Skips random and `empty` nodes, views (they
/// alias), and results larger than a bound (folding must not bloat the graph). The folded
/// value is the eager kernel's result bit for bit, so folding never changes an answer.
Expected<void> constant_fold(ir::Graph& g, PassContext& ctx);

/// canonicalize: algebraic simplifications that keep results bit-identical and types
/// unchanged: x*1, x+0 (only where the result type equals x's), x-x for integers, neg(neg
/// x), permute of permute, view of view, expand to the same shape, cast to the same dtype.
Expected<void> canonicalize(ir::Graph& g, PassContext& ctx);

} // namespace kiln::passes
