// The layout pass of conv nets: which 4-D activations are stored channels-last (NHWC).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::passes {

/// What assign_channels_last did: values now stored channels-last, copies inserted where a
/// region meets a layout it cannot take, and the cost model's choice for each region (one
/// log line each, for KILN_LOGS=layout and `kiln dump --stage fused`).
struct LayoutStats {
  int64_t channels_last = 0; // values stored channels-last
  int64_t conversions = 0;   // copies inserted at the regions' boundaries
  int64_t regions = 0;       // regions stored channels-last
  int64_t plain_regions = 0; // regions the cost model left contiguous
  std::vector<std::string> log;
};

/// The layout of conv nets: stores 4-D f32 results channels-last (NHWC: C innermost, then
/// W, H, N) through chains of library conv2d that oneDNN itself runs on NHWC
/// (library_conv_runs_nhwc: compiled code then runs the kernel eager code runs) and
/// lowerable pointwise nodes (relu, a residual add, an affine not folded away), where
/// oneDNN's convolutions run without reordering their source and result and the generated
/// kernels iterate in memory order. Only when library convolutions are available (oneDNN).
///
/// A conv result is marked, then every pointwise result with a marked operand of its shape
/// (but no value a sum or product reads: there the contiguous layout's vector lanes split
/// the reduced extent, as in batch norm's train-mode statistics, and keep its rounding);
/// pointwise marks that no channels-last reader wants (a conv's source, or a marked
/// pointwise node) are dropped again, last to first, so a region ends in a kernel that
/// writes contiguous while it transposes. A region is the marked values connected through
/// marked nodes' operands. Its cost either way, in bytes moved besides the kernels: stored
/// contiguous, oneDNN reorders each conv's source into its layout and its result back (the
/// source and result bytes of every conv); stored channels-last, one copy converts each
/// conv source that is not channels-last and each marked value that a graph output, a view
/// or a conv outside the region reads (they see the layout eager code gives), each copy its
/// bytes and 64 KiB for being a step of its own. The cheaper wins; a tie stays contiguous.
/// Types of marked values differ from inference only in strides, which the verifier
/// accepts on non-view nodes. Runs after simplification, before fusion.
LayoutStats assign_channels_last(ir::Graph& g);

} // namespace kiln::passes
