// Shape and dtype inference for the factories (empty, full, arange) and random ops.
#include <cmath>
#include <limits>

#include "runtime/ops/dispatch.h"
#include "runtime/ops/op.h"

namespace kiln::ops {
namespace {

std::vector<TensorMeta> one(DType dtype, Shape sizes) {
  return {TensorMeta{dtype, ::kiln::FactoryDevice::current(), std::move(sizes), {}, false}};
}

std::vector<TensorMeta> sized(const Attrs& a, size_t sizes_attr, DType dtype, const char* op) {
  const auto& sizes = a.ints(sizes_attr);
  checked_numel(sizes, op);
  return one(dtype, sizes);
}

/// The range [lo, hi] of an integer dtype (bool: [0, 1]).
void int_range(DType t, double& lo, double& hi) {
  switch (t) {
  case DType::bool_:
    lo = 0;
    hi = 1;
    return;
  case DType::i8:
    lo = -128;
    hi = 127;
    return;
  case DType::u8:
    lo = 0;
    hi = 255;
    return;
  case DType::i32:
    lo = -2147483648.0;
    hi = 2147483647.0;
    return;
  default:
    lo = -9223372036854775808.0;
    hi = 9223372036854775807.0;
    return;
  }
}

/// Largest finite value of a floating dtype.
double float_max(DType t) {
  switch (t) {
  case DType::f16: return 65504.0;
  case DType::bf16: return 3.3895313892515355e38;
  case DType::f32: return std::numeric_limits<float>::max();
  default: return std::numeric_limits<double>::max();
  }
}

/// PyTorch's checked scalar conversion: a value that overflows the dtype is an error (a
/// float into an integer type is truncated first; Inf and NaN stay allowed in floats).
void check_fits(const Scalar& v, DType t, const char* op) {
  if (t == DType::bool_) return; // any number converts to bool (!= 0)
  bool ok = true;
  if (is_floating(t)) {
    double d = v.to_double();
    ok = !std::isfinite(d) || std::abs(d) <= float_max(t);
  } else if (v.is_floating()) {
    double d = std::trunc(v.to_double()), lo, hi;
    int_range(t, lo, hi);
    ok = std::isfinite(d) && d >= lo && (t == DType::i64 ? d < hi : d <= hi); // hi of i64 is 2^63
  } else if (t != DType::i64) {
    double lo, hi;
    int_range(t, lo, hi);
    int64_t i = v.to_int();
    ok = i >= static_cast<int64_t>(lo) && i <= static_cast<int64_t>(hi);
  }
  KILN_CHECK(ok, op, ": value ",
             v.is_floating() ? std::to_string(v.to_double()) : std::to_string(v.to_int()),
             " cannot be converted to ", t, " without overflow");
}

} // namespace

std::vector<TensorMeta> infer_empty(std::span<const TensorMeta>, const Attrs& a) {
  return sized(a, 0, a.dtype(1), "empty");
}

std::vector<TensorMeta> infer_full(std::span<const TensorMeta>, const Attrs& a) {
  check_fits(a.scalar(1), a.dtype(2), "full");
  return sized(a, 0, a.dtype(2), "full");
}

// torch.arange: the length is ceil((end - start) / step), in int64 arithmetic on the truncated
// bounds for i64 (where double would lose precision) and in double on the given bounds
// otherwise (even for i32: arange(0., 2.5, 1., i32) has 3 elements, as in PyTorch).
std::vector<TensorMeta> infer_arange(std::span<const TensorMeta>, const Attrs& a) {
  const Scalar &start = a.scalar(0), &end = a.scalar(1), &step = a.scalar(2);
  DType t = a.dtype(3);
  KILN_CHECK(t != DType::bool_, "arange: not supported for dtype bool");
  KILN_CHECK(std::isfinite(start.to_double()) && std::isfinite(end.to_double()),
             "arange: unsupported range: ", start.to_double(), " -> ", end.to_double());
  // The checks see the bounds in the accumulation type (int64 for integer dtypes: truncated).
  double cs = start.to_double(), ce = end.to_double(), cstep = step.to_double();
  if (is_integral(t)) {
    // Converting a double outside int64 (or a NaN/Inf step) is undefined in C++; PyTorch's
    // checked conversion to the int64 accumulation type refuses it.
    check_fits(start, DType::i64, "arange");
    check_fits(end, DType::i64, "arange");
    check_fits(step, DType::i64, "arange");
    cs = static_cast<double>(start.to_int());
    ce = static_cast<double>(end.to_int());
    cstep = static_cast<double>(step.to_int());
  }
  KILN_CHECK(cstep != 0 && !std::isnan(cstep), "arange: step must be nonzero");
  KILN_CHECK((cstep > 0 && ce >= cs) || (cstep < 0 && ce <= cs),
             "arange: upper bound and lower bound inconsistent with step sign (start ", cs,
             ", end ", ce, ", step ", cstep, ")");
  int64_t length = 0;
  if (t == DType::i64) {
    int64_t s = start.to_int(), e = end.to_int(), st = step.to_int();
    int64_t sgn = st > 0 ? 1 : -1, diff = 0;
    bool overflow =
        __builtin_sub_overflow(e, s, &diff) || __builtin_add_overflow(diff, st - sgn, &diff);
    KILN_CHECK(!overflow, "arange: invalid size, possible overflow? (start ", s, ", end ", e,
               ", step ", st, ")");
    length = diff / st;
  } else {
    double ds = start.to_double(), de = end.to_double(), dstep = step.to_double();
    double n = std::ceil((de - ds) / dstep);
    KILN_CHECK(n >= 0 && n <= 9.2e18, "arange: invalid size, possible overflow? (start ", ds,
               ", end ", de, ", step ", dstep, ")");
    length = static_cast<int64_t>(n);
  }
  return one(t, {length});
}

std::vector<TensorMeta> infer_rand(std::span<const TensorMeta>, const Attrs& a) {
  KILN_CHECK(is_floating(a.dtype(1)), "rand: expected a floating-point dtype, got ", a.dtype(1));
  return sized(a, 0, a.dtype(1), "rand");
}

std::vector<TensorMeta> infer_randn(std::span<const TensorMeta>, const Attrs& a) {
  KILN_CHECK(is_floating(a.dtype(1)), "randn: expected a floating-point dtype, got ", a.dtype(1));
  return sized(a, 0, a.dtype(1), "randn");
}

std::vector<TensorMeta> infer_randint(std::span<const TensorMeta>, const Attrs& a) {
  int64_t low = a.i(0), high = a.i(1);
  DType t = a.dtype(3);
  KILN_CHECK(high > low, "randint: expected high > low, got low ", low, " and high ", high);
  if (!is_floating(t)) {
    double lo, hi;
    int_range(t, lo, hi);
    KILN_CHECK(static_cast<double>(low) >= lo && static_cast<double>(high - 1) <= hi,
               "randint: range [", low, ", ", high, ") doesn't fit in dtype ", t);
  }
  return sized(a, 2, t, "randint");
}

} // namespace kiln::ops
