// DType names and type promotion.
#include "runtime/dtype.h"

#include <array>
#include <ostream>

namespace kiln {

std::string_view dtype_name(DType t) {
  switch (t) {
  case DType::f32: return "f32";
  case DType::f64: return "f64";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  case DType::i8: return "i8";
  case DType::u8: return "u8";
  case DType::i32: return "i32";
  case DType::i64: return "i64";
  case DType::bool_: return "bool";
  }
  return "?";
}

bool parse_dtype(std::string_view name, DType& out) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    if (dtype_name(t) == name) {
      out = t;
      return true;
    }
  }
  return false;
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::bool_) return b;
  if (b == DType::bool_) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa != fb) return fa ? a : b;
  if (fa) { // both floating
    if (a == DType::f64 || b == DType::f64) return DType::f64;
    return DType::f32; // f32 with a 16-bit float, or f16 with bf16
  }
  // Both integral. Signed/unsigned of the same width widens (u8 + i8 → i16 in PyTorch; kiln
  // has no i16, so i32 holds every value of both).
  if ((a == DType::u8 && b == DType::i8) || (a == DType::i8 && b == DType::u8)) return DType::i32;
  return itemsize(a) >= itemsize(b) ? (a == DType::u8 ? b : a) : b;
}

} // namespace kiln
