// The partition of a forward graph for its backward (AOTAutograd's min-cut
// rematerialization): which forward values the forward keeps for the backward, and which
// cheap values the backward computes again from them instead.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/graph.h"

namespace kiln::passes {

struct SavePartition {
  /// The forward values the backward reads: graph inputs and node results, in graph order
  /// (inputs first). Each value the backward needs is one of them or is recomputed.
  std::vector<const ir::Value*> saved;
  /// The forward nodes the backward runs again, in graph order: their operands are saved
  /// values or results of earlier ones. Empty: the backward reads what it needs as it is.
  std::vector<const ir::Node*> recompute;
  /// Bytes the forward keeps for the backward: what it needs as it is (`needed_bytes`), and
  /// with this partition (`saved_bytes`). Free values (parameters, constants, `free`) count 0.
  int64_t needed_bytes = 0;
  int64_t saved_bytes = 0;
};

/// Whether the backward may compute n's result again from its operands: a pointwise op with
/// one result, a view, or a `full`. Not random ops, reductions, contractions or data
/// movement (gather, cat, ...): their cost or their results' size makes saving better, and
/// a random op's draw must not be taken twice.
bool is_recomputable(const ir::Node& n);

/// The partition of forward graph g for a backward that reads `needed` (values of g) by a
/// minimum cut: every value has a cost to keep (its bytes; 0 for parameter and constant
/// inputs and for the `free` values, which outlive the call anyway: its results), a value
/// computed by a node that is not recomputable must be computed by the forward, and the
/// backward computes again the recomputable values on the needed side of the cut. Among
/// the cuts of least bytes it keeps the one nearest the needed values (the fewest
/// recomputed nodes). Deterministic: ties break by graph order.
SavePartition partition_for_backward(const ir::Graph& g, std::span<const ir::Value* const> needed,
                                     std::span<const ir::Value* const> free);

} // namespace kiln::passes
