// Type: construction, normalisation of strides, conversion to and from TensorMeta, text form.
#include "ir/type.h"

#include <algorithm>
#include <ostream>

#include "runtime/error.h"
#include "runtime/ops/op.h"

namespace kiln::ir {

Type::Type(DType dtype, Shape sizes, Shape strides, Device device, bool wrapped_number)
    : dtype_(dtype), sizes_(std::move(sizes)), strides_(std::move(strides)), device_(device),
      wrapped_number_(wrapped_number) {
  KILN_ASSERT(strides_.empty() || strides_.size() == sizes_.size(), "type: ", sizes_.size(),
              " sizes but ", strides_.size(), " strides");
  KILN_ASSERT(!wrapped_number_ || sizes_.empty(), "type: a wrapped number must be 0-d");
  if (!strides_.empty() && is_static() && strides_ == contiguous_strides(sizes_)) strides_.clear();
}

Type Type::from_meta(const TensorMeta& m) {
  return Type(m.dtype, m.sizes, m.strides, m.device, m.wrapped_number);
}

TensorMeta Type::to_meta() const { return {dtype_, device_, sizes_, strides_, wrapped_number_}; }

Shape Type::full_strides() const {
  if (!strides_.empty()) return strides_;
  KILN_ASSERT(is_static(), "type ", str(), ": strides of a symbolic shape");
  return contiguous_strides(sizes_);
}

bool Type::is_static() const {
  return std::none_of(sizes_.begin(), sizes_.end(), [](int64_t s) { return is_symbolic(s); });
}

int64_t Type::numel() const {
  KILN_ASSERT(is_static(), "type ", str(), ": numel of a symbolic shape");
  return numel_of(sizes_);
}

Type Type::with_dtype(DType t) const {
  Type r = *this;
  r.dtype_ = t;
  return r;
}

Type Type::with_sizes(Shape sizes) const {
  return Type(dtype_, std::move(sizes), {}, device_, false);
}

namespace {
void print_dims(std::ostream& os, const Shape& dims, bool symbolic) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) os << ',';
    if (symbolic && Type::is_symbolic(dims[i]))
      os << 's' << Type::symbol_id(dims[i]);
    else
      os << dims[i];
  }
}
} // namespace

std::string Type::str() const {
  std::ostringstream os;
  os << dtype_name(dtype_);
  if (!wrapped_number_) {
    os << '[';
    print_dims(os, sizes_, true);
    os << ']';
    if (!strides_.empty()) {
      os << '{';
      print_dims(os, strides_, false);
      os << '}';
    }
  }
  if (!device_.is_cpu()) os << '@' << device_.str();
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Type& t) { return os << t.str(); }

} // namespace kiln::ir
