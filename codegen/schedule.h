// Schedule: how a kernel's loops run, kept apart from what they compute (the Kernel). A
// heuristic picks it now; max-autotune will search over the same fields.
#pragma once

#include <cstdint>
#include <string>

#include "ir/kernel/kernel.h"

namespace kiln::codegen {

struct Schedule {
  /// Which loop is vector code: none, the last outer variable (lanes are neighbouring
  /// outer points), or the last inner variable (lanes are neighbouring reduction points).
  enum class Vector : uint8_t { none, outer, inner };
  Vector vector = Vector::none;
  int lanes = 1;
  /// Vectors per step of the inner vector loop (inner mode): a reduction there keeps
  /// lanes x unroll accumulators, which hides the latency of its adds.
  int unroll = 1;
  /// Points of the last outer dim per row: rows split that dim into blocks so that even a
  /// one-dimensional kernel has rows to run in parallel.
  int64_t block = 1;
  /// Rows per parallel chunk; a kernel of at most `grain` rows runs on the calling thread.
  int64_t grain = 1;

  /// Rows of a kernel: the outer points but the last dim, times the blocks of the last.
  int64_t rows(const ir::kernel::Kernel& k) const;
  std::string str() const;
};

/// The heuristic: vector width from the widest value type and the target's registers, inner
/// vectorisation for reductions over a unit-stride last dim, blocks of 4096 points, chunks
/// of at least kParallelGrain element operations.
Schedule choose_schedule(const ir::kernel::Kernel& k, int vector_bytes);

} // namespace kiln::codegen
