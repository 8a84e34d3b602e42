// Hand-built runtime Plans for tests: a kernel with the generated ABI and an eager step.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "runtime/plan.h"

namespace kiln::testing {

/// Counts, when set, how often `twice` ran each row.
inline std::vector<std::atomic<int>>* g_row_runs = nullptr;

/// A kernel with the generated ABI: out[r] = 2 * in[r] for r in [begin, end) (f32).
inline void twice(char* const* buffers, int64_t begin, int64_t end) {
  const auto* in = reinterpret_cast<const float*>(buffers[0]);
  auto* out = reinterpret_cast<float*>(buffers[1]);
  for (int64_t r = begin; r < end; ++r) {
    out[r] = 2 * in[r];
    if (g_row_runs) (*g_row_runs)[static_cast<size_t>(r)]++;
  }
}

/// An eager call of `op` over slots.
inline Plan::Step eager(Op op, const Attrs& attrs, std::vector<size_t> operands,
                        std::vector<size_t> results) {
  Plan::Step s;
  s.op = op;
  s.attrs = &attrs;
  s.operands = std::move(operands);
  s.results = std::move(results);
  return s;
}

} // namespace kiln::testing
