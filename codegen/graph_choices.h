// Choices max_autotune makes on the graph before fusion, each by timing both forms of one node
// on inputs of its types and keeping the answer in the autotune database.
//
// Library or generated GEMM, per shape: each matmul of f32 operands (a of rank >= 2; b a
// matrix or a batch with a's batch dims; up to kMaxGemmWork multiply-adds) is timed both ways
// on operands of its sizes and strides: as the library call (oneDNN's primitive), and as the
// kernel kiln generates from the loop IR for its reduction form, sum over k of
// a[..., m, k] * b[..., k, n] (b copied row-major first when it is transposed). That kernel's
// schedule is a register tile (codegen/schedule.h: `jam` rows of A by `unroll` vectors of B
// per step, 8 accumulators, each B vector loaded once for the jammed rows) in cache tiles of
// the output. Where the generated kernel is faster (by more than the autotuner's noise
// guard), the matmul is rewritten into that form before fusion, which then fuses its
// prologue and epilogue into the same kernel. Choices are kept in the autotune database
// (key: the operands' types and the target's identity), so a later compile of the same shapes
// times nothing.
//
// B is read in place (row-major), not packed into panels per register tile, and k is not
// blocked: the kernel wins for thin and small products (batch-1 layers, small heads, where
// the library's per-call cost dominates) and loses for large ones, which stay library calls.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/autotune.h"
#include "ir/graph.h"

namespace kiln::codegen {

class Target;

// Split reductions, per shape: a reduction (sum, amax, amin) over the last dim of f32 rows
// fewer than twice the threads, each at least kMinSplitRow long, runs on one thread per row.
// Split into C chunks per row (C a divisor of the row, chunks of at least 1024), it becomes
// a reduction of rows times C chunks (which run in parallel) and a small one over the chunks:
// op(op(view(x, [..., C, N/C]), [-1]), [-1]). Each is timed both ways; where the split form is
// faster, the node is rewritten. The order of a sum changes (by the f64 rule's bound).
inline constexpr int64_t kMinSplitRow = int64_t{1} << 15;

/// Largest batch*M*K*N timed both ways; larger products stay library calls untimed.
inline constexpr int64_t kMaxGemmWork = int64_t{1} << 30;

struct GemmChoices {
  int64_t considered = 0; // matmuls timed or found in the database
  int64_t generated = 0;  // of them, rewritten for a generated kernel
  int64_t timings = 0;    // variants timed (two per matmul timed)
  int64_t database_hits = 0;
};

/// The database key of a matmul of operands of types a and b on `target`.
std::string gemm_key(const Target& target, const ir::Type& a, const ir::Type& b);

/// Decides each eligible matmul of g (see above) and rewrites those the generated kernel wins.
GemmChoices choose_gemms(ir::Graph& g, const Target& target, const AutotuneOptions& options);

struct SplitChoices {
  int64_t considered = 0; // reductions timed or found in the database
  int64_t split = 0;      // of them, rewritten into the split form
  int64_t timings = 0;
  int64_t database_hits = 0;
};

/// The chunks an eligible reduction node is split into (see above); 0 when it is not one.
int64_t split_chunks(const ir::Node& n);

/// On a GPU a row's reduction runs on one block (codegen/cuda/cuda_source.h), so a reduction of
/// fewer rows than kDeviceSplitGroups, each at least kMinSplitRow long, leaves most of the
/// device idle: it is split, without timing, into chunks per row (a divisor of the row, chunks
/// of at least 1024), as many as make kDeviceSplitGroups groups when the row has enough.
inline constexpr int64_t kDeviceSplitGroups = 1024;
/// The chunks a reduction on a device is split into; 0 when it is not one to split.
int64_t device_split_chunks(const ir::Node& n);
/// Splits every such reduction of g (a graph for a device target).
SplitChoices split_for_device(ir::Graph& g);

/// The database key of a reduction `op` over the last dim of an input of type x, split into
/// `chunks`.
std::string split_key(const Target& target, Op op, const ir::Type& x, int64_t chunks);

/// Decides each eligible reduction of g (see above) and rewrites those the split form wins.
SplitChoices choose_splits(ir::Graph& g, const Target& target, const AutotuneOptions& options);

} // namespace kiln::codegen
