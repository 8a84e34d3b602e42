// The reduction engine of the eager kernels: reduced/kept dim geometry over any strides, and
// the fixed pairwise combination tree that makes float sums accurate and independent of the
// thread count.
//
// Order of combination (the contract every reduction kernel here follows): the reduced
// elements of one output are numbered r = 0..R-1 in row-major order over the reduced dims
// sorted by decreasing stride. [0, R) is split pairwise (about the middle, on a multiple of
// kReduceBlock) down to leaves of at most kReduceBlock elements; a leaf folds element r into
// lane (r - leaf start) % kReduceLanes and folds the lanes as ((0 1)(2 3))((4 5)(6 7)).
// Threads only ever evaluate whole subtrees of this tree, so results are bit-identical for
// any thread count.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/parallel.h"
#include "runtime/shape.h"

namespace kiln::kernels {

/// Elements per leaf of the pairwise tree.
inline constexpr int64_t kReduceBlock = 128;
/// Interleaved accumulators per leaf.
inline constexpr int kReduceLanes = 8;
/// Most dims a reduction walks (after merging); beyond it the kernels refuse.
inline constexpr int kMaxReduceDims = 64;

/// Where [b, e) splits in the pairwise tree: near the middle, on a leaf boundary.
inline int64_t tree_split(int64_t b, int64_t e) {
  int64_t half = (e - b) / 2;
  half -= half % kReduceBlock;
  return b + std::max(half, kReduceBlock);
}

/// Combines leaf(b, e) values over [b, e) along the pairwise tree.
template <typename V, typename Leaf, typename Combine>
V tree_reduce(int64_t b, int64_t e, const Leaf& leaf, const Combine& combine) {
  if (e - b <= kReduceBlock) return leaf(b, e);
  const int64_t m = tree_split(b, e);
  V left = tree_reduce<V>(b, m, leaf, combine);
  V right = tree_reduce<V>(m, e, leaf, combine);
  return combine(left, right);
}

/// Most subtrees tree_reduce_parallel hands out: enough to balance any thread count, and a
/// bound on its bookkeeping whatever n is.
inline constexpr int64_t kMaxTreePieces = 1024;

/// tree_reduce over [0, n) with whole subtrees (of at least kParallelGrain elements, at most
/// about 4 per thread and never more than kMaxTreePieces) evaluated in parallel; bit-identical
/// to the serial tree, since the pieces are subtrees of the same tree.
template <typename V, typename Leaf, typename Combine>
V tree_reduce_parallel(int64_t n, const Leaf& leaf, const Combine& combine) {
  if (n <= 2 * kParallelGrain || in_parallel_region()) return tree_reduce<V>(0, n, leaf, combine);
  // Split the tree to a fixed depth: 2^depth pieces, bounded by threads, not by n.
  const int64_t target = std::min<int64_t>(kMaxTreePieces, 4 * int64_t{get_num_threads()});
  int depth = 0;
  while ((int64_t{1} << depth) < target)
    ++depth;
  auto is_piece = [&](int64_t b, int64_t e, int level) {
    return level == depth || e - b <= kParallelGrain;
  };
  std::vector<std::pair<int64_t, int64_t>> pieces;
  auto collect = [&](auto& self, int64_t b, int64_t e, int level) -> void {
    if (is_piece(b, e, level)) {
      pieces.emplace_back(b, e);
      return;
    }
    const int64_t m = tree_split(b, e);
    self(self, b, m, level + 1);
    self(self, m, e, level + 1);
  };
  collect(collect, 0, n, 0);
  KILN_ASSERT(static_cast<int64_t>(pieces.size()) <= (int64_t{1} << depth),
              "tree_reduce_parallel made ", pieces.size(), " pieces for depth ", depth);
  std::vector<V> partial(pieces.size());
  parallel_for(0, static_cast<int64_t>(pieces.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      partial[i] = tree_reduce<V>(pieces[i].first, pieces[i].second, leaf, combine);
  });
  size_t next = 0;
  auto join = [&](auto& self, int64_t b, int64_t e, int level) -> V {
    if (is_piece(b, e, level)) return partial[next++];
    const int64_t m = tree_split(b, e);
    V left = self(self, b, m, level + 1);
    V right = self(self, m, e, level + 1);
    return combine(left, right);
  };
  return join(join, 0, n, 0);
}

/// Most input elements one eager reduction reads: 2^40 (about 1.1e12), minutes of work at
/// memory speed. Past it (only reachable through broadcast views such as expand, whose
/// elements take no memory) a reduction would run for hours to years, so it is refused.
inline constexpr int64_t kMaxReduceElements = int64_t{1} << 40;

/// Throws kiln::Error naming the op and the shape when a reduction of an input of these
/// sizes would read more than kMaxReduceElements elements.
inline void check_reduce_size(const char* op, IntList sizes) {
  int64_t numel = 1;
  bool overflow = false;
  for (int64_t s : sizes)
    overflow |= __builtin_mul_overflow(numel, s, &numel);
  KILN_CHECK(!overflow && numel <= kMaxReduceElements, op, ": reducing an input of shape ",
             shape_str(sizes), " (",
             overflow ? std::string("more than 2^63") : std::to_string(numel),
             " elements) is beyond the eager reduction limit of 2^40 = ", kMaxReduceElements,
             " elements (minutes of work at memory speed; this one would run for hours or "
             "years); reduce a smaller view, e.g. before an expand");
}

/// Folds a leaf's lanes in the fixed order ((0 1)(2 3))((4 5)(6 7)).
template <typename Acc, typename Combine>
Acc fold_lanes(const std::array<Acc, kReduceLanes>& l, const Combine& c) {
  return c(c(c(l[0], l[1]), c(l[2], l[3])), c(c(l[4], l[5]), c(l[6], l[7])));
}

/// A reduction's input split into kept dims (outputs, in logical row-major order) and
/// reduced dims (sorted by decreasing stride), each merged where dims are dense across.
struct ReduceGeometry {
  Shape kept_sizes, kept_strides;
  Shape red_sizes, red_strides; // never empty: a lone size-1 dim when nothing is reduced
  int64_t out_numel = 1;
  int64_t red_numel = 1;
};

/// Appends (size, stride) to a dim list, merging with the previous dim when dense across it.
inline void push_merged(Shape& sizes, Shape& strides, int64_t size, int64_t stride) {
  if (size == 1) return;
  if (!sizes.empty() && strides.back() == stride * size) {
    sizes.back() *= size;
    strides.back() = stride;
    return;
  }
  sizes.push_back(size);
  strides.push_back(stride);
}

inline ReduceGeometry reduce_geometry(IntList sizes, IntList strides,
                                      const std::vector<bool>& mask) {
  ReduceGeometry g;
  std::vector<size_t> red;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (mask[d]) {
      red.push_back(d);
      g.red_numel *= sizes[d];
    } else {
      push_merged(g.kept_sizes, g.kept_strides, sizes[d], strides[d]);
      g.out_numel *= sizes[d];
    }
  }
  // Walking the reduced dims by decreasing stride visits memory in order for any permutation.
  std::stable_sort(red.begin(), red.end(),
                   [&](size_t a, size_t b) { return strides[a] > strides[b]; });
  for (size_t d : red)
    push_merged(g.red_sizes, g.red_strides, sizes[d], strides[d]);
  if (g.red_sizes.empty()) {
    g.red_sizes.push_back(1);
    g.red_strides.push_back(0);
  }
  KILN_CHECK(g.kept_sizes.size() <= kMaxReduceDims && g.red_sizes.size() <= kMaxReduceDims,
             "reduction: tensors with more than ", kMaxReduceDims,
             " non-mergeable dims are not "
             "supported (shape ",
             shape_str(sizes), ")");
  return g;
}

/// Element offset of the row-major position `linear` of sizes/strides.
inline int64_t offset_of(int64_t linear, IntList sizes, IntList strides) {
  int64_t off = 0;
  for (size_t d = sizes.size(); d-- > 0;) {
    off += (linear % sizes[d]) * strides[d];
    linear /= sizes[d];
  }
  return off;
}

/// Calls f(k, offset) for reduced positions r in [b, e) (k = r - b), offsets in elements.
template <typename F>
void walk_positions(IntList sizes, IntList strides, int64_t b, int64_t e, F&& f) {
  const size_t rank = sizes.size();
  if (rank == 1) {
    const int64_t s = strides[0];
    for (int64_t r = b; r < e; ++r)
      f(r - b, r * s);
    return;
  }
  std::array<int64_t, kMaxReduceDims> idx{};
  int64_t off = 0;
  int64_t rem = b;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rem % sizes[d];
    rem /= sizes[d];
    off += idx[d] * strides[d];
  }
  const int64_t inner = sizes[rank - 1], is = strides[rank - 1];
  int64_t k = 0;
  for (int64_t pos = b; pos < e;) {
    const int64_t run = std::min(inner - idx[rank - 1], e - pos);
    for (int64_t i = 0; i < run; ++i)
      f(k + i, off + i * is);
    k += run;
    pos += run;
    idx[rank - 1] += run;
    off += run * is;
    if (idx[rank - 1] < inner) continue;
    off -= inner * is;
    idx[rank - 1] = 0;
    for (size_t d = rank - 1; d-- > 0;) {
      ++idx[d];
      off += strides[d];
      if (idx[d] < sizes[d]) break;
      off -= sizes[d] * strides[d];
      idx[d] = 0;
    }
  }
}

} // namespace kiln::kernels
