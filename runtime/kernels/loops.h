// Elementwise loops over broadcast operands with arbitrary strides, for the eager kernels.
//
// An N-operand loop (operand 0 is the output) visits every index of the output shape once.
// Dimensions of size 1 are dropped and adjacent dimensions merged where every operand is
// dense across them, so most calls become one flat inner loop. Work above kParallelGrain
// elements is split into chunks on the OpenMP pool; each chunk is a contiguous range of
// the flattened index space, so results do not depend on the thread count.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "runtime/parallel.h"
#include "runtime/tensor.h"

namespace kiln::kernels {

/// Byte strides of t when broadcast to `sizes` (stride 0 on broadcast dims).
std::vector<int64_t> broadcast_byte_strides(const Tensor& t, IntList sizes);

/// Element offsets of every batch matrix of t (its dims but the last two), with t's batch
/// dims right-aligned to `batch`; size-1 (broadcast) dims contribute nothing.
std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch);

template <size_t N> struct LoopPlan {
  std::vector<int64_t> sizes;                  // after dropping and merging, outermost first
  std::array<std::vector<int64_t>, N> strides; // byte strides per operand, same rank
  std::array<char*, N> base;
  int64_t numel = 1;
};

/// Builds the merged loop nest for `operands` broadcast to `sizes`.
template <size_t N>
LoopPlan<N> make_loop_plan(IntList sizes, const std::array<const Tensor*, N>& operands) {
  LoopPlan<N> p;
  std::array<std::vector<int64_t>, N> st;
  for (size_t k = 0; k < N; ++k) {
    st[k] = broadcast_byte_strides(*operands[k], sizes);
    p.base[k] = static_cast<char*>(operands[k]->raw_data());
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    p.numel *= sizes[d];
    if (sizes[d] == 1) continue;
    bool merge = !p.sizes.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = p.strides[k].back() == st[k][d] * sizes[d];
    if (merge) {
      p.sizes.back() *= sizes[d];
      for (size_t k = 0; k < N; ++k)
        p.strides[k].back() = st[k][d];
    } else {
      p.sizes.push_back(sizes[d]);
      for (size_t k = 0; k < N; ++k)
        p.strides[k].push_back(st[k][d]);
    }
  }
  if (p.sizes.empty()) {
    p.sizes.push_back(1);
    for (size_t k = 0; k < N; ++k)
      p.strides[k].push_back(0);
  }
  return p;
}

/// Runs inner(ptrs, inner_strides, n) over the plan; ptrs point at the first element of a
/// run of n elements along the innermost dim, inner_strides are its byte strides.
template <size_t N, typename Inner>
void run_loop_range(const LoopPlan<N>& p, int64_t begin, int64_t end, Inner&& inner) {
  const int64_t rank = static_cast<int64_t>(p.sizes.size());
  const int64_t inner_size = p.sizes[rank - 1];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k)
    inner_strides[k] = p.strides[k][rank - 1];
  // Multi-index of `begin`.
  std::vector<int64_t> idx(rank, 0);
  int64_t rem = begin;
  for (int64_t d = rank - 1; d >= 0; --d) {
    idx[d] = rem % p.sizes[d];
    rem /= p.sizes[d];
  }
  int64_t pos = begin;
  while (pos < end) {
    std::array<char*, N> ptrs;
    for (size_t k = 0; k < N; ++k) {
      int64_t off = 0;
      for (int64_t d = 0; d < rank; ++d)
        off += idx[d] * p.strides[k][d];
      ptrs[k] = p.base[k] + off;
    }
    int64_t n = std::min(inner_size - idx[rank - 1], end - pos);
    inner(ptrs, inner_strides, n);
    pos += n;
    idx[rank - 1] += n;
    for (int64_t d = rank - 1; d > 0 && idx[d] == p.sizes[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

/// Runs the plan over all elements, in parallel chunks when large.
template <size_t N, typename Inner> void run_loop(const LoopPlan<N>& p, Inner&& inner) {
  if (p.numel == 0) return;
  parallel_for(0, p.numel, kParallelGrain,
               [&](int64_t b, int64_t e) { run_loop_range(p, b, e, inner); });
}

/// out[i] = f(a[i]) with a broadcast to out's shape; Out/A are storage types, f maps
/// compute values. Contiguous runs take a branch the compiler vectorises.
template <typename Out, typename A, typename F>
void map_unary(const Tensor& out, const Tensor& a, F f) {
  auto plan = make_loop_plan<2>(out.sizes(), {&out, &a});
  run_loop(plan, [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
    auto* o = reinterpret_cast<Out*>(p[0]);
    auto* x = reinterpret_cast<const A*>(p[1]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(A)) {
      for (int64_t i = 0; i < n; ++i)
        o[i] = static_cast<Out>(f(x[i]));
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * s[0]) =
            static_cast<Out>(f(*reinterpret_cast<const A*>(p[1] + i * s[1])));
    }
  });
}

} // namespace kiln::kernels
