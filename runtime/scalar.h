// Scalar: a number operand of an op (2.5, 3, true), kept with its kind for type promotion.
#pragma once

#include <cstdint>
#include <type_traits>

#include "runtime/dtype.h"

namespace kiln {

class Scalar {
public:
  enum class Kind : uint8_t { floating, integral, boolean };

  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Scalar(T v) { // NOLINT(google-explicit-constructor)
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::boolean;
      i_ = v ? 1 : 0;
      d_ = static_cast<double>(i_);
    } else if constexpr (std::is_floating_point_v<T>) {
      kind_ = Kind::floating;
      d_ = static_cast<double>(v);
      i_ = 0;
    } else {
      kind_ = Kind::integral;
      i_ = static_cast<int64_t>(v);
      d_ = static_cast<double>(v);
    }
  }
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}     // NOLINT(google-explicit-constructor)
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {} // NOLINT(google-explicit-constructor)

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::floating; }
  bool is_integral() const { return kind_ == Kind::integral; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  double to_double() const { return kind_ == Kind::floating ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::floating ? static_cast<int64_t>(d_) : i_; }
  /// The dtype a tensor made from this scalar alone gets: f32, i64 or bool (PyTorch's defaults
  /// for Python numbers... f32 for floats, as torch.get_default_dtype()).
  DType default_dtype() const {
    return kind_ == Kind::floating   ? kDefaultFloat
           : kind_ == Kind::integral ? DType::i64
                                     : DType::bool_;
  }

private:
  double d_ = 0;
  int64_t i_ = 0;
  Kind kind_ = Kind::floating;
};

} // namespace kiln
