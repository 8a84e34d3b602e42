// DType: the element types of kiln tensors, their sizes, names and PyTorch's promotion rules.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "runtime/half.h"

namespace kiln {

/// Element type. The order of the enumerators is not meaningful; use the predicates.
enum class DType : uint8_t { f32, f64, f16, bf16, i8, u8, i32, i64, bool_ };

inline constexpr int kNumDTypes = 9;

/// Bytes per element.
constexpr int64_t itemsize(DType t) {
  switch (t) {
  case DType::f64:
  case DType::i64: return 8;
  case DType::f32:
  case DType::i32: return 4;
  case DType::f16:
  case DType::bf16: return 2;
  case DType::i8:
  case DType::u8:
  case DType::bool_: return 1;
  }
  return 0;
}

constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
constexpr bool is_integral(DType t) { // integers, not bool
  return t == DType::i8 || t == DType::u8 || t == DType::i32 || t == DType::i64;
}
constexpr bool is_reduced_float(DType t) { return t == DType::f16 || t == DType::bf16; }

/// "f32", "bf16", "bool", ... (the spelling of the IR and of error messages).
std::string_view dtype_name(DType t);
/// Parses dtype_name's spelling; returns false for an unknown name.
bool parse_dtype(std::string_view name, DType& out);
std::ostream& operator<<(std::ostream& os, DType t);

/// The promoted type of two dtypes (PyTorch's promote_types): bool < integers < floats;
/// u8 with i8 gives i16 in PyTorch, which kiln lacks, so it gives i32; f16 with bf16 gives f32.
DType promote_types(DType a, DType b);

/// The dtype a float Python-like scalar takes when nothing else decides (f32).
inline constexpr DType kDefaultFloat = DType::f32;

/// Maps a C++ element type to its DType.
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::bool_; };
template <typename T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

/// Expands X(T) once per element type, for explicit template instantiations.
#define KILN_FOR_EACH_ELEMENT_TYPE(X)                                                              \
  X(float)                                                                                         \
  X(double) X(::kiln::Half) X(::kiln::BFloat16) X(int8_t) X(uint8_t) X(int32_t) X(int64_t) X(bool)

/// Calls fn(T{}) with the C++ type of a dtype: the one switch kernels dispatch through.
template <typename Fn> decltype(auto) visit_dtype(DType t, Fn&& fn) {
  switch (t) {
  case DType::f32: return fn(float{});
  case DType::f64: return fn(double{});
  case DType::f16: return fn(Half{});
  case DType::bf16: return fn(BFloat16{});
  case DType::i8: return fn(int8_t{});
  case DType::u8: return fn(uint8_t{});
  case DType::i32: return fn(int32_t{});
  case DType::i64: return fn(int64_t{});
  case DType::bool_: return fn(bool{});
  }
  return fn(float{});
}

/// The type arithmetic on T happens in: float for f16/bf16, T otherwise.
template <typename T> struct compute_type { using type = T; };
template <> struct compute_type<Half> { using type = float; };
template <> struct compute_type<BFloat16> { using type = float; };
template <typename T> using compute_t = typename compute_type<T>::type;

} // namespace kiln
