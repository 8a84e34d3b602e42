// Every graph pass, declared together, each with what it requires and guarantees.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// dead-code-elimination (short name `dce`): removes every node none of whose results is
/// used, transitively (one backward walk: a node's users all come after it), then every
/// constant input that nothing uses. A graph output or an in-place write is a use, so the
/// nodes they read stay. User and parameter inputs are kept even when unused: they are the
/// graph's signature. Random ops are removed like any other when dead: a draw is not a side
/// effect. Requires a graph whose use lists are right (any verified graph).
Expected<void> dead_code_elimination(ir::Graph& g, PassContext& ctx);

/// common-subexpression-elimination (short name `cse`): first merges constant inputs of equal
/// type (dtype, sizes, wrapped-number flag) and equal bytes (so -0.0 and 0.0 stay apart, and
/// a NaN matches the same NaN bits; names are labels and do not count), then replaces each
/// node by an earlier node with the same op, the same attributes (compared exactly: floats by
/// their bits, scalars by kind and bits), the same operands (the same values, in the same
/// order: add(a, b) and add(b, a) are not merged) and the same result types. Random ops and
/// `empty` are never merged: two draws, or two uninitialised buffers, are different values.
/// Nor is a node (other than a view) whose result is a graph output merged into one whose
/// result, or a view of it, is another output: the caller would get one tensor twice where
/// eager code returns two (two views of one value alias already, and may merge). The replaced
/// nodes and constants are removed; nodes that only they used are left for
/// dead-code-elimination. One forward walk; candidates are tried in graph order, so the
/// result does not depend on addresses.
Expected<void> common_subexpression_elimination(ir::Graph& g, PassContext& ctx);

/// The largest result, in elements, that constant-fold materialises: folding must not bloat
/// the graph with big constants (an `expand` of a scalar stays an expand).
inline constexpr int64_t kMaxFoldedElements = 4096;

/// constant-fold: runs a node whose operands are all constant inputs (at least one) with the
/// eager kernel (kiln::dispatch on the constants' data, wrapped-number flags included) and
/// replaces its results with new constant inputs, then removes the node. One forward walk,
/// so chains of constant nodes fold completely. Skipped: random ops and `empty` (not
/// values), view ops (they alias their operand), factories without operands (`full`,
/// `arange`: already as small as a constant), results of more than kMaxFoldedElements
/// elements, nodes with a result that is a graph output (the caller would receive the
/// graph's own constant storage, which later calls reuse), and results whose new constant's
/// type would differ from the node's result type (a constant is contiguous, on the CPU). A kernel
/// that throws kiln::Error (integer division by zero) leaves its node in place and is not an error
/// of the pass: the graph fails when it runs, as eager code would. The folded value is the eager
/// kernel's result bit for bit. The operand constants that lose their last use are left for
/// dead-code-elimination.
Expected<void> constant_fold(ir::Graph& g, PassContext& ctx);

/// canonicalize: algebraic simplifications that keep every result bit-identical and its type
/// (dtype, sizes, strides, device, wrapped-number flag) exactly the same; each rewrite
/// happens only when the replacing value's type equals the replaced one's, so broadcasts,
/// promotions (i32 * 1.0 is f32) and layout changes (an elementwise op of a strided x is
/// contiguous) block it. A "one" or "zero" operand is a constant input with at least one
/// element, all bitwise equal, to 1 (or to 0), wrapped numbers included, or a `full`
/// node whose value, as the eager kernel stores it in its dtype, is 1 (or 0): full(1.5, i32)
/// holds 1. A constant of a larger shape broadcasts x, and the type check blocks that.
///   mul(x, 1), mul(1, x)            -> x
///   add(x, 0), add(0, x)            -> x   integers and bool; for floats only -0.0, since
///                                          -0.0 + 0.0 = +0.0
///   sub(x, 0)                       -> x   integers; for floats only +0.0 (an integer 0
///                                          operand converts to +0.0)
///   sub(x, x)                       -> full(0) for integer results (x - x is NaN for a
///                                          float NaN or Inf); only where full's type, which
///                                          is contiguous on the CPU, equals the result's
///   neg(neg(x))                     -> x
///   permute(permute(x, p), q)       -> permute(x, r) with r[i] = p[q[i]], or x when r is
///                                          the identity and x's type is the result's
///   view(view(x, a), b)             -> view(x, b), or x when b is x's shape and x's type
///                                          is the result's (kept when view(x, b) is not
///                                          inferable or gives another type)
///   view, permute or expand whose result type equals its operand's (view to its own shape,
///   the identity permutation, expand to its own sizes) -> the operand (equal sizes and
///   strides, and these ops keep the storage offset: the same elements)
///   cast(x, dtype of x)             -> x
///   copy(x)                         -> x   when x is a fresh result, or views of one, each
///                                          with one use (the copy, the next view), of the
///                                          copy's type: no one else sees its buffer
///                                          (autograd's clone of a leaf's first gradient)
/// A node of a fresh result (mul, add, sub, neg, cast) that is a graph output is not replaced
/// by a value that shares storage with a graph input or with another output (as PyTorch's
/// inductor does in remove_noop_ops): the caller would get an alias eager code never gives.
/// New nodes are built through inference and used only when the inferred type equals the
/// old result type; each replaced node is removed, nodes and constants that only it used
/// are left for dead-code-elimination. One forward walk: a rewrite only changes the operands
/// of later nodes, so chains (x * 1 * 1, four negations, three transposes) simplify at once.
Expected<void> canonicalize(ir::Graph& g, PassContext& ctx);

/// passes/layout.h's assign_channels_last as a registered pass ("channels-last"; not in the
/// default pipeline: code generation runs it after simplification, before fusion).
Expected<void> channels_last(ir::Graph& g, PassContext& ctx);

/// The simplification pipeline of a compiled graph, one straight list (passes/pipeline.cpp):
/// canonicalize, constant-fold, common-subexpression-elimination, dead-code-elimination.
PassManager default_pipeline();

} // namespace kiln::passes
