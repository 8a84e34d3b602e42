// Type: the type of an IR value, a tensor's dtype, sizes, layout and device (no data).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/shape.h"

namespace kiln {
struct TensorMeta;
}

namespace kiln::ir {

/// A tensor type: element type, sizes, strides, device, and whether the value is a wrapped
/// number (a C++ scalar operand, which takes part in type promotion by kind only).
///
/// Sizes are static by default. A negative size is a *symbolic* dimension `s<k>` with
/// k = -size - 1; nothing infers symbolic shapes yet (the dynamic-shapes issue will), so the
/// verifier rejects them, but the parser, printer, hash and equality carry them already.
///
/// Strides are empty for the contiguous row-major layout, which is the common case; explicit
/// strides (views: transposes, slices, expands) are kept, except that strides equal to the
/// contiguous ones are normalised to empty so that equal layouts compare equal.
class Type {
public:
  Type() = default;
  Type(DType dtype, Shape sizes, Shape strides = {}, Device device = Device::cpu(),
       bool wrapped_number = false);
  static Type from_meta(const TensorMeta& m);
  TensorMeta to_meta() const;

  DType dtype() const { return dtype_; }
  const Shape& sizes() const { return sizes_; }
  /// Explicit strides, or empty when contiguous.
  const Shape& strides() const { return strides_; }
  /// Strides with the contiguous case spelled out.
  Shape full_strides() const;
  Device device() const { return device_; }
  bool wrapped_number() const { return wrapped_number_; }
  int64_t rank() const { return static_cast<int64_t>(sizes_.size()); }
  bool is_contiguous() const { return strides_.empty(); }
  bool is_static() const;
  /// Element count (static types only).
  int64_t numel() const;

  static constexpr bool is_symbolic(int64_t size) { return size < 0; }
  static constexpr int64_t symbol(int64_t id) { return -id - 1; }
  static constexpr int64_t symbol_id(int64_t size) { return -size - 1; }

  Type with_dtype(DType t) const;
  Type with_sizes(Shape sizes) const; // contiguous

  friend bool operator==(const Type& a, const Type& b) = default;

  /// The text form: `f32[8,256]`, `f32[256,8]{1,256}`, `f16[4]@cuda:0`, `f64` (wrapped number),
  /// `i64[]` (0-d tensor), `f32[s0,16]`.
  std::string str() const;

private:
  DType dtype_ = DType::f32;
  Shape sizes_;
  Shape strides_;
  Device device_ = Device::cpu();
  bool wrapped_number_ = false;
};

std::ostream& operator<<(std::ostream& os, const Type& t);

} // namespace kiln::ir
