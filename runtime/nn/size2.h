// nn::Size2: a (height, width) pair for 2-d layer arguments that also accepts one number.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::nn {

/// Conv2d(3, 16, 3) or Conv2d(3, 16, {3, 5}): one number means the same for both dims, like
/// PyTorch's `int | tuple[int, int]` arguments.
struct Size2 {
  int64_t h = 0;
  int64_t w = 0;
  Size2(int64_t v) : h(v), w(v) {} // NOLINT(google-explicit-constructor)
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  std::vector<int64_t> vec() const { return {h, w}; }
  friend bool operator==(const Size2&, const Size2&) = default;
};

} // namespace kiln::nn
