// The output loop of factories and random ops: out[i] = gen(i) by row-major index i, any strides.
#pragma once

#include <array>
#include <cstdint>

#include "runtime/kernels/loops.h"

namespace kiln::kernels {

/// Writes gen(i) to the element of `out` with row-major index i (in out's shape), for every i;
/// out may have any strides (fill_ passes views). make_gen() is called once per parallel chunk,
/// so a generator may cache state between consecutive indices (a Philox block, say). Chunks
/// are ranges of i, so the result does not depend on the thread count.
template <typename T, typename MakeGen> void fill_indexed(const Tensor& out, MakeGen make_gen) {
  // The plan drops size-1 dims and merges adjacent ones without reordering, so its flat
  // position is the row-major index.
  auto plan = make_loop_plan<1>(out.sizes(), {&out});
  if (plan.numel == 0) return;
  parallel_for(0, plan.numel, kParallelGrain, [&](int64_t begin, int64_t end) {
    auto gen = make_gen();
    int64_t pos = begin;
    run_loop_range(plan, begin, end,
                   [&](const std::array<char*, 1>& p, const std::array<int64_t, 1>& s, int64_t n) {
                     if (s[0] == static_cast<int64_t>(sizeof(T))) {
                       T* o = reinterpret_cast<T*>(p[0]);
                       for (int64_t i = 0; i < n; ++i)
                         o[i] = gen(pos + i);
                     } else {
                       for (int64_t i = 0; i < n; ++i)
                         *reinterpret_cast<T*>(p[0] + i * s[0]) = gen(pos + i);
                     }
                     pos += n;
                   });
  });
}

} // namespace kiln::kernels
