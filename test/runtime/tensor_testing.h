// Tensor builders and switches shared by the runtime tests.
#pragma once

#include <cstdint>
#include <vector>

#include <kiln/kiln.h>

#include "runtime/kernels/onednn.h"

namespace kiln::testing {

/// 0, 1, ..., n-1 as f32.
inline Tensor iota_f32(int64_t n) { return arange(n, TensorOptions(DType::f32)); }

/// The values of t as floats, row-major.
inline std::vector<float> vals(const Tensor& t) { return t.to_vector<float>(); }

inline bool same_storage(const Tensor& a, const Tensor& b) {
  return a.impl().storage == b.impl().storage;
}

/// Deterministic values in [-2, 2] on a 1/8 grid: products and short sums are exact in f32,
/// so a library and a plain loop must agree exactly with a double reference.
inline std::vector<float> grid_values(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int>((s >> 16) % 33) - 16) / 8.0f;
  }
  return v;
}

inline Tensor grid(Shape shape, uint32_t seed) {
  return tensor<float>(grid_values(numel_of(shape), seed), shape);
}

/// Switches oneDNN on or off for one scope (off: the plain loops run for every dtype).
struct OnednnMode {
  bool previous;
  explicit OnednnMode(bool on) : previous(kernels::set_onednn_enabled(on)) {}
  ~OnednnMode() { kernels::set_onednn_enabled(previous); }
  OnednnMode(const OnednnMode&) = delete;
  OnednnMode& operator=(const OnednnMode&) = delete;
};

} // namespace kiln::testing
