// How a loop nest indexes graph values: the iteration domain of a fused group (a pointwise
// shape, or a reduction's operand shape and reduced dims) and the index maps from a point of
// it to an element of a value read through broadcasting and view ops. Fusion asks these
// questions to decide merges; the lowering to loop IR (codegen/lower_group) builds its
// loads and stores from the same answers.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "ir/graph.h"
#include "ir/kernel/index.h"
#include "runtime/shape.h"

namespace kiln::ir::kernel {

using IndexVec = std::vector<Index>;

/// Whether a node is a view op (its result aliases its operand: an index map, not a step).
bool is_view(const ir::Node* n);

/// The value a view chain starts from.
const ir::Value* view_source(const ir::Value* v);

/// The index into an operand of shape `operand` that a pointwise result at `idx` reads
/// (numpy broadcasting: trailing dims align, size-1 dims read index 0).
IndexVec broadcast_index(const Shape& operand, const IndexVec& idx);

/// The operand index a view node's result at `idx` aliases; `extents` bound the loop
/// variables (for the floordiv/mod of a reshape).
IndexVec view_operand_index(const ir::Node& n, const IndexVec& idx,
                            std::span<const int64_t> extents);

/// The element offset of `idx` in a value laid out with the type's strides.
Index linearize(const ir::Type& t, const IndexVec& idx);

/// Reduced dims of a folding reduction node (sum, prod, amax, amin, argmax, argmin),
/// sorted; all dims for an empty list.
std::vector<int64_t> reduction_dims(const ir::Node& n);

/// What a group iterates: a pointwise shape, or a reduction's operand shape S and dims.
struct Domain {
  bool reduction = false;
  Shape shape; // pointwise: the domain; reduction: S
  std::vector<int64_t> dims;
  /// Pointwise, when lowering: the loop variable of each dim (a permutation; empty: dim k is
  /// variable k). A group that stores a permuted dense layout (channels-last) iterates its
  /// dims in memory order, so that the last variable, the vector one, moves along unit
  /// stride.
  std::vector<int> var_of;
  friend bool operator==(const Domain&, const Domain&) = default;

  /// The domain a single node iterates.
  static Domain of(const ir::Node& n);
  /// The parallel (outer) extents: the shape (in var_of's order), or S without the reduced
  /// dims.
  Shape outer() const;
  /// The reduced (inner) extents.
  Shape inner() const;
  /// The index of a value of `sizes` at the canonical point (outer vars, then inner vars),
  /// or nullopt when the domain does not iterate such a value: pointwise, the domain shape;
  /// a reduction, S (in its loops) or the reduced shape with or without the kept dims.
  std::optional<IndexVec> canonical(const Shape& sizes) const;
  /// Loop variable v over [0, extent): the constant 0 when the extent is 1, so that
  /// broadcasting (which reads index 0 of a size-1 dim) gives the same index.
  static Index var(int v, int64_t extent);
  /// Whether a value of these sizes is iterated inside the inner loops.
  bool is_full(const Shape& sizes) const { return reduction && sizes == shape; }
  std::string str() const;
};

} // namespace kiln::ir::kernel
