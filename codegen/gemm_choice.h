// Library or generated GEMM, per shape (Mode::max_autotune): each matmul of two 2-D f32
// operands (up to kMaxGemmWork multiply-adds) is timed both ways on operands of its sizes and
// strides: as the library call (oneDNN's primitive), and as the kernel kiln generates from
// the loop IR for its reduction form, sum over k of a[m,k] * b[k,n] (a vector loop over n,
// the k loop accumulating in registers). Where the generated kernel is faster (by more than
// the autotuner's noise guard), the matmul is rewritten into that form before fusion, which
// then fuses its prologue and epilogue into the same kernel. Choices are kept in the autotune
// database (key: the operands' types and the target's identity), so a later compile of the
// same shapes times nothing.
//
// The generated kernel is a plain reduction, not a register-tiled micro-kernel over packed
// panels: it wins for thin products (batch-1 layers, small heads), where the library's
// per-call cost dominates, and loses for large ones, which stay library calls.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/autotune.h"
#include "ir/graph.h"

namespace kiln::codegen {

class Target;

/// Largest M*K*N timed both ways; larger products stay library calls untimed.
inline constexpr int64_t kMaxGemmWork = int64_t{1} << 24;

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

} // namespace kiln::codegen
