// Freezing at compile time: an eval-mode batch norm after a convolution is folded into the
// convolution's weights and bias while the traced graph is compiled.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "frontend/trace.h"
#include "ir/graph.h"

namespace kiln::frontend {

/// Folds each per-channel affine chain after a conv2d into the conv: the chain is the
/// conv's result put through add, sub, mul and div (by the chain value, never dividing it)
/// with operands computed only from captured tensors (parameters, buffers) and constants,
/// each broadcasting per output channel ([C], [1, C, 1, 1], ... or a scalar), each link the
/// only reader of the one before. An eval-mode batch norm is such a chain
/// ((y - mean) * rsqrt(var + eps) * weight + bias), as is a scale or a shift of the conv.
/// The chain is evaluated now into a per-channel scale s and shift t, and the conv becomes
/// conv(x, W * s, b * s + t) with both as constants of the graph; the old nodes are left
/// without readers (dead code elimination removes them).
///
/// `bound` holds the tensors bound to g's inputs. Every captured tensor a fold read is
/// appended to `reads` with its version, so that a replay whose parameters or running
/// statistics changed (an optimizer step, load_state_dict, train() then eval()) traces and
/// folds again. Tensors the graph writes in place are never folded. Returns the folds made.
int64_t fold_conv_affine(ir::Graph& g, std::span<const Tensor> bound,
                         std::vector<HostReadGuard>& reads);

} // namespace kiln::frontend
