// operator<< for Tensor: PyTorch's repr (torch/_tensor_str.py) with kiln's dtype names.
//
// The rules copied from PyTorch (precision 4, linewidth 80, threshold 1000, edgeitems 3):
// - One formatter for the whole tensor decides the width of every element. Floats use fixed
//   notation with 4 decimals, "int mode" (`1.`) when every finite value is an integer, and
//   scientific notation when max/min of the nonzero finite magnitudes exceeds 1000, the max
//   exceeds 1e8, or (outside int mode) the min is below 1e-4. Non-finite values and zeros do
//   not take part in these decisions or in the width.
// - More than 1000 elements print summarised: the first and last 3 entries of every dim with
//   `...` between; the formatter then sees only the printed entries.
// - Suffixes (`dtype=i32`, `size=(0, 3)`, `device='cuda:0'`, `requires_grad=True`) follow the
//   data after ", ", or on a new line when the last line would pass 80 columns.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/tensor.h"
#include "runtime/tracing.h"

namespace kiln {
namespace {

constexpr int kPrecision = 4;
constexpr int64_t kLineWidth = 80;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

/// One element as read from the host copy: floats widened to double, integers to int64.
struct Value {
  double f = 0;
  int64_t i = 0;
};

enum class Kind { floating, integral, boolean };

Kind kind_of(DType t) {
  if (is_floating(t)) return Kind::floating;
  return t == DType::bool_ ? Kind::boolean : Kind::integral;
}

/// Reads element `offset` (in elements, from the tensor's first element) of a CPU tensor.
Value read(const Tensor& t, int64_t offset) {
  Value v;
  const char* base = static_cast<const char*>(t.raw_data());
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const char* p = base + offset * static_cast<int64_t>(sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {
      v.i = *reinterpret_cast<const uint8_t*>(p) != 0; // any nonzero byte reads as true
    } else if constexpr (std::is_integral_v<T>) {
      T x;
      std::memcpy(&x, p, sizeof(T));
      v.i = static_cast<int64_t>(x);
    } else {
      T x;
      std::memcpy(&x, p, sizeof(T));
      v.f = static_cast<double>(static_cast<compute_t<T>>(x));
    }
  });
  return v;
}

/// The indices of one dim that get printed: all, or the edge items around a gap (-1).
std::vector<int64_t> printed_indices(int64_t size, bool summarize) {
  std::vector<int64_t> idx;
  if (summarize && size > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i)
      idx.push_back(i);
    idx.push_back(-1);
    for (int64_t i = size - kEdgeItems; i < size; ++i)
      idx.push_back(i);
  } else {
    for (int64_t i = 0; i < size; ++i)
      idx.push_back(i);
  }
  return idx;
}

/// Collects every printed element (get_summarized_data in PyTorch) for the formatter.
void collect(const Tensor& t, int64_t dim, int64_t offset, bool summarize,
             std::vector<Value>& out) {
  if (dim == t.dim()) {
    out.push_back(read(t, offset));
    return;
  }
  for (int64_t i : printed_indices(t.size(dim), summarize))
    if (i >= 0) collect(t, dim + 1, offset + i * t.stride(dim), summarize, out);
}

std::string format_double(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

/// Python's spelling of non-finite floats (it never prints a sign on NaN).
std::string nonfinite(double v) {
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

/// PyTorch's _Formatter: picks the notation and the common width from the printed values.
class Formatter {
public:
  Formatter(Kind kind, const std::vector<Value>& values) : kind_(kind) {
    if (kind_ != Kind::floating) {
      for (const Value& v : values)
        width_ = std::max(width_, format_plain(v).size());
      return;
    }
    std::vector<double> finite;
    for (const Value& v : values)
      if (std::isfinite(v.f) && v.f != 0) finite.push_back(v.f);
    if (finite.empty()) return;
    double lo = std::abs(finite[0]), hi = lo;
    for (double x : finite) {
      lo = std::min(lo, std::abs(x));
      hi = std::max(hi, std::abs(x));
      if (x != std::ceil(x)) int_mode_ = false;
    }
    if (int_mode_) {
      sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8;
    } else {
      sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4;
    }
    for (double x : finite) {
      std::string s = sci_mode_   ? format_double("%.4e", x)
                      : int_mode_ ? format_double("%.0f", x) + "."
                                  : format_double("%.4f", x);
      width_ = std::max(width_, s.size());
    }
  }

  size_t width() const { return width_; }

  std::string format(const Value& v) const {
    std::string s = kind_ == Kind::floating ? format_float(v.f) : format_plain(v);
    if (s.size() < width_) s.insert(0, width_ - s.size(), ' ');
    return s;
  }

private:
  std::string format_plain(const Value& v) const {
    if (kind_ == Kind::boolean) return v.i ? "True" : "False";
    return std::to_string(v.i);
  }

  std::string format_float(double x) const {
    if (!std::isfinite(x)) return nonfinite(x);
    if (sci_mode_) return format_double("%.4e", x);
    if (int_mode_) return format_double("%.0f", x) + ".";
    return format_double("%.4f", x);
  }

  Kind kind_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  size_t width_ = 1;
};

static_assert(kPrecision == 4, "the printf formats above spell the precision");

/// _tensor_str_with_formatter: nested brackets, line wrapping of the innermost dim.
std::string tensor_body(const Tensor& t, int64_t dim, int64_t offset, int64_t indent,
                        bool summarize, const Formatter& fmt) {
  int64_t rank = t.dim();
  if (rank == 0) return fmt.format(read(t, offset));
  std::vector<int64_t> idx = printed_indices(t.size(dim), summarize);
  std::string out = "[";
  if (dim == rank - 1) {
    auto width = static_cast<int64_t>(fmt.width()) + 2; // element plus ", "
    int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / width);
    for (size_t k = 0; k < idx.size(); ++k) {
      if (k > 0) {
        out += ',';
        if (static_cast<int64_t>(k) % per_line == 0) {
          out += '\n';
          out.append(static_cast<size_t>(indent + 1), ' ');
        } else {
          out += ' ';
        }
      }
      out += idx[k] < 0 ? " ..." : fmt.format(read(t, offset + idx[k] * t.stride(dim)));
    }
    return out + "]";
  }
  std::string sep(1, ',');
  sep.append(static_cast<size_t>(rank - dim - 1), '\n');
  sep.append(static_cast<size_t>(indent + 1), ' ');
  for (size_t k = 0; k < idx.size(); ++k) {
    if (k > 0) out += sep;
    out += idx[k] < 0 ? "..."
                      : tensor_body(t, dim + 1, offset + idx[k] * t.stride(dim), indent + 1,
                                    summarize, fmt);
  }
  return out + "]";
}

std::string size_tuple(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + (s.size() == 1 ? ",)" : ")");
}

/// _add_suffixes: each suffix goes after ", " or on its own line past the line width.
std::string add_suffixes(std::string body, const std::vector<std::string>& suffixes,
                         int64_t indent) {
  size_t nl = body.rfind('\n');
  // PyTorch computes len - rfind + 1, where rfind is -1 without a newline.
  auto last_line = static_cast<int64_t>(body.size()) -
                   (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const std::string& s : suffixes) {
    auto len = static_cast<int64_t>(s.size());
    if (last_line + len + 2 > kLineWidth) {
      body += ",\n";
      body.append(static_cast<size_t>(indent), ' ');
      body += s;
      last_line = indent + len;
    } else {
      body += ", ";
      body += s;
      last_line += len + 2;
    }
  }
  return body + ")";
}

} // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(<undefined>)";
  HostReadScope read(&t, HostRead::print);
  const std::string prefix = "tensor(";
  const auto indent = static_cast<int64_t>(prefix.size());
  std::vector<std::string> suffixes;
  if (!t.device().is_cpu()) suffixes.push_back("device='" + t.device().str() + "'");
  bool default_dtype =
      t.dtype() == DType::f32 || t.dtype() == DType::i64 || t.dtype() == DType::bool_;
  std::string body;
  if (t.is_traced()) {
    // A traced tensor is a value of a pending graph: only its metadata exists.
    body = "<traced>";
    suffixes.push_back("size=" + size_tuple(t.sizes()));
    suffixes.push_back("dtype=" + std::string(dtype_name(t.dtype())));
  } else if (t.numel() == 0) {
    if (t.dim() != 1) suffixes.push_back("size=" + size_tuple(t.sizes()));
    // Nothing shows the kind of an empty tensor, so any dtype but the default float prints.
    if (t.dtype() != DType::f32) suffixes.push_back("dtype=" + std::string(dtype_name(t.dtype())));
    body = "[]";
  } else {
    if (!default_dtype) suffixes.push_back("dtype=" + std::string(dtype_name(t.dtype())));
    Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
    bool summarize = h.numel() > kThreshold;
    std::vector<Value> printed;
    collect(h, 0, 0, summarize, printed);
    Formatter fmt(kind_of(h.dtype()), printed);
    body = tensor_body(h, 0, 0, indent, summarize, fmt);
  }
  if (t.requires_grad()) suffixes.push_back("requires_grad=True");
  return os << add_suffixes(prefix + body, suffixes, indent);
}

} // namespace kiln
