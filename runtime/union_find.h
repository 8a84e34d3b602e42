// UnionFind: disjoint sets over 0..n-1 (fusion groups, buffers that share bytes).
#pragma once

#include <cstddef>
#include <numeric>
#include <utility>
#include <vector>

namespace kiln {

/// Disjoint sets with path halving. The root of a set is its smallest element, so roots do
/// not depend on the order of the unions.
class UnionFind {
public:
  explicit UnionFind(size_t n = 0) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  size_t size() const { return parent_.size(); }
  size_t find(size_t x) {
    while (parent_[x] != x)
      x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  /// Joins the sets of a and b; returns the root of the union.
  size_t unite(size_t a, size_t b) {
    a = find(a);
    b = find(b);
    if (b < a) std::swap(a, b);
    parent_[b] = a;
    return a;
  }

private:
  std::vector<size_t> parent_;
};

} // namespace kiln
