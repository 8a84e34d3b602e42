// Shape arithmetic with overflow checks.
#include "runtime/shape.h"

#include <algorithm>
#include <ostream>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace kiln {

Shape contiguous_strides(IntList sizes) {
  Shape strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return strides;
}

Shape channels_last_strides(IntList sizes) {
  KILN_ASSERT(sizes.size() == 4, "channels-last strides of a ", sizes.size(), "-d shape");
  const auto one = [](int64_t s) { return s > 1 ? s : 1; };
  Shape strides(4);
  strides[1] = 1;
  strides[3] = one(sizes[1]);
  strides[2] = strides[3] * one(sizes[3]);
  strides[0] = strides[2] * one(sizes[2]);
  return strides;
}

bool is_dense(IntList sizes, IntList strides) {
  KILN_ASSERT(strides.size() == sizes.size(), "is_dense: ", strides.size(), " strides for ",
              sizes.size(), " sizes");
  std::vector<std::pair<int64_t, int64_t>> dims; // stride, size of the dims that move
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return true;
    if (sizes[i] != 1) dims.push_back({strides[i], sizes[i]});
  }
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (auto [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

int64_t checked_numel(IntList sizes, const char* op) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, op, ": negative size in shape ", shape_str(sizes));
    KILN_CHECK(!__builtin_mul_overflow(n, s, &n), op, ": shape ", shape_str(sizes),
               " has more elements than fit in int64");
  }
  return n;
}

int64_t numel_of(IntList sizes) {
  int64_t n = 1;
  for (int64_t s : sizes)
    n *= s;
  return n;
}

bool is_contiguous(IntList sizes, IntList strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 0) return true;
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

Shape broadcast_shapes(IntList a, IntList b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
               " are not broadcastable (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  int64_t r = rank == 0 ? 1 : rank; // a 0-d tensor accepts dim 0 and -1, as in PyTorch
  KILN_CHECK(dim >= -r && dim < r, op, ": dim ", dim, " is out of range for a tensor of rank ",
             rank, " (expected in [", -r, ", ", r - 1, "])");
  return dim < 0 ? dim + r : dim;
}

std::string shape_str(IntList s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << shape_str(s); }

} // namespace kiln
