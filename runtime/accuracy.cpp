// The f64 reference rule (accuracy.h). Elements are read straight from storage by their
// strides, so no kiln kernel takes part in judging kiln's kernels.
#include "runtime/accuracy.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <sstream>

#include "runtime/error.h"
#include "runtime/half.h"
#include "runtime/ops.h"
#include "runtime/shape.h"

namespace kiln {
namespace {

/// Reads elements of a concrete tensor by row-major logical index.
class ElementReader {
public:
  explicit ElementReader(const Tensor& t) : t_(t) {
    if (t.numel() > 0) base_ = static_cast<const char*>(t.raw_data());
  }

  double as_double(int64_t flat) const {
    const char* p = address(flat);
    switch (t_.dtype()) {
    case DType::f32: return load<float>(p);
    case DType::f64: return load<double>(p);
    case DType::f16: return half_bits_to_float(load<uint16_t>(p));
    case DType::bf16: return bf16_bits_to_float(load<uint16_t>(p));
    default: return static_cast<double>(as_int(flat));
    }
  }

  int64_t as_int(int64_t flat) const {
    const char* p = address(flat);
    switch (t_.dtype()) {
    case DType::i8: return load<int8_t>(p);
    case DType::u8: return load<uint8_t>(p);
    case DType::i32: return load<int32_t>(p);
    case DType::i64: return load<int64_t>(p);
    case DType::bool_: return load<uint8_t>(p);
    default: return static_cast<int64_t>(as_double(flat));
    }
  }

  uint64_t bits(int64_t flat) const {
    uint64_t v = 0;
    std::memcpy(&v, address(flat), static_cast<size_t>(t_.itemsize()));
    return v;
  }

private:
  template <typename T> static T load(const char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  const char* address(int64_t flat) const {
    int64_t off = 0;
    for (int64_t d = t_.dim() - 1; d >= 0; --d) {
      const int64_t n = t_.size(d);
      off += (flat % n) * t_.stride(d);
      flat /= n;
    }
    return base_ + off * t_.itemsize();
  }

  const Tensor& t_;
  const char* base_ = nullptr;
};

std::string index_str(int64_t flat, IntList shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d)
    s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

/// A value of dtype `t` in the fewest digits that read back as the same value (f64 values
/// as doubles, the narrower floats as floats, which hold them exactly).
std::string num_str(double v, DType t = DType::f32) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0" : "0";
  char buf[40];
  auto [end, ec] = t == DType::f64 ? std::to_chars(buf, buf + sizeof buf, v)
                                   : std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

/// Dtype and shape first: a mismatch there makes every element comparison meaningless.
std::optional<std::string> check_meta(const Tensor& got, const Tensor& want) {
  if (got.defined() != want.defined())
    return std::string(got.defined() ? "got a tensor, expected an undefined one"
                                     : "got an undefined tensor, expected a tensor");
  if (!got.defined()) return std::nullopt;
  if (got.dtype() != want.dtype())
    return "dtype: got " + std::string(dtype_name(got.dtype())) + ", expected " +
           std::string(dtype_name(want.dtype())) + " (shape " + shape_str(want.sizes()) + ")";
  if (got.sizes() != want.sizes())
    return "shape: got " + shape_str(got.sizes()) + ", expected " + shape_str(want.sizes()) +
           " (dtype " + std::string(dtype_name(want.dtype())) + ")";
  return std::nullopt;
}

/// The first failing element and the count, as one message.
struct Failures {
  int64_t first = -1;
  int64_t count = 0;
  std::string detail;
  void add(int64_t i, const std::string& what) {
    if (first < 0) {
      first = i;
      detail = what;
    }
    ++count;
  }
  std::optional<std::string> message(const Tensor& want) const {
    if (first < 0) return std::nullopt;
    std::ostringstream os;
    os << "at index " << index_str(first, want.sizes()) << " (element " << first << " of "
       << want.numel() << "): " << detail << "; dtype " << dtype_name(want.dtype()) << ", shape "
       << shape_str(want.sizes()) << "; " << count << " of " << want.numel() << " elements differ";
    return os.str();
  }
};

} // namespace

double accuracy_factor(DType t) { return t == DType::f16 || t == DType::bf16 ? 3.0 : 2.0; }

double dtype_eps(DType t) {
  switch (t) {
  case DType::f64: return 0x1.0p-52;
  case DType::f32: return 0x1.0p-23;
  case DType::f16: return 0x1.0p-10;
  case DType::bf16: return 0x1.0p-7;
  default: return 0;
  }
}

std::optional<std::string> check_bitwise(const Tensor& got, const Tensor& want) {
  if (auto m = check_meta(got, want)) return m;
  if (!want.defined()) return std::nullopt;
  ElementReader g(got), w(want);
  const bool floating = is_floating(want.dtype());
  Failures f;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (g.bits(i) == w.bits(i)) continue;
    const DType t = want.dtype();
    f.add(i, floating ? "got " + num_str(g.as_double(i), t) + ", expected " +
                            num_str(w.as_double(i), t) + " (bit for bit)"
                      : "got " + std::to_string(g.as_int(i)) + ", expected " +
                            std::to_string(w.as_int(i)));
  }
  return f.message(want);
}

std::optional<std::string> check_accuracy(const Tensor& got, const Tensor& eager,
                                          const Tensor& reference, const AccuracyOptions& options) {
  if (auto m = check_meta(got, eager)) return m;
  if (!eager.defined()) return std::nullopt;
  const DType t = eager.dtype();
  const int64_t n = eager.numel();
  ElementReader g(got), e(eager);
  Failures f;
  if (!is_floating(t)) {
    for (int64_t i = 0; i < n; ++i)
      if (g.as_int(i) != e.as_int(i))
        f.add(i, "got " + std::to_string(g.as_int(i)) + ", expected " +
                     std::to_string(e.as_int(i)) + " (exact)");
    return f.message(eager);
  }
  const Tensor& ref_t = reference.defined() ? reference : eager;
  KILN_CHECK(ref_t.sizes() == eager.sizes(), "check_accuracy: the reference has shape ",
             shape_str(ref_t.sizes()), ", the eager result ", shape_str(eager.sizes()));
  ElementReader r(ref_t);
  Tensor magnitude;
  if (options.magnitude.defined()) magnitude = options.magnitude.expand(eager.sizes());
  std::optional<ElementReader> mag;
  if (magnitude.defined()) mag.emplace(magnitude);

  // The output's magnitude, where eager's dtype holds it: an f64 value beside eager's Inf
  // would make the floor useless everywhere else.
  double max_ref = 0;
  for (int64_t i = 0; i < n; ++i)
    if (double v = r.as_double(i); std::isfinite(v) && std::isfinite(e.as_double(i)))
      max_ref = std::max(max_ref, std::fabs(v));
  const double factor = accuracy_factor(t), eps = dtype_eps(t);

  for (int64_t i = 0; i < n; ++i) {
    const double x = g.as_double(i), y = e.as_double(i);
    double ref = r.as_double(i);
    // NaN and ±Inf positions are eager's, exactly.
    if (std::isnan(x) || std::isnan(y) || std::isinf(x) || std::isinf(y)) {
      if (!(std::isnan(x) && std::isnan(y)) && x != y)
        f.add(i, "got " + num_str(x, t) + ", eager " + num_str(y, t) +
                     " (NaN and Inf positions match)");
      continue;
    }
    if (options.zero_sign && x == 0 && y == 0 && std::signbit(x) != std::signbit(y)) {
      f.add(i, "got " + num_str(x, t) + ", eager " + num_str(y, t) + " (the sign of zero)");
      continue;
    }
    // Where f64 itself overflowed or met a NaN that eager's dtype did not, eager is the
    // best reference there is.
    if (!std::isfinite(ref)) ref = y;
    double scale = max_ref;
    if (mag) {
      const double m = std::fabs(mag->as_double(i));
      if (std::isfinite(m)) scale = std::max(scale, m);
    }
    const double err = std::fabs(x - ref), eager_err = std::fabs(y - ref);
    const double floor = 8 * eps * scale;
    const double bound = factor * eager_err + floor;
    if (err <= bound) continue;
    std::ostringstream os;
    os << "got " << num_str(x, t) << ", eager " << num_str(y, t) << ", f64 reference "
       << num_str(ref, DType::f64) << "; error " << num_str(err) << " > bound " << num_str(bound)
       << " (" << factor << " x eager's error " << num_str(eager_err) << " + floor "
       << num_str(floor) << ")";
    f.add(i, os.str());
  }
  return f.message(eager);
}

namespace {
/// Copies of `inputs`, floating ones in f64 (|x| with `abs`): the reference run may write
/// its inputs, so even tensors whose dtype is already right are copied.
std::vector<Tensor> f64_copies(std::span<const Tensor> inputs, bool abs) {
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    if (!t.defined() || !is_floating(t.dtype()))
      out.push_back(t.defined() ? t.clone() : t);
    else
      out.push_back(abs ? t.to(DType::f64).abs() : t.to(DType::f64).clone());
  }
  return out;
}
} // namespace

std::vector<Tensor> to_f64(std::span<const Tensor> inputs) { return f64_copies(inputs, false); }

std::vector<Tensor> to_f64_abs(std::span<const Tensor> inputs) { return f64_copies(inputs, true); }

} // namespace kiln
