// Shapes and strides: sizes per dimension, element strides, broadcasting, dim wrapping.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

namespace kiln {

/// Sizes (or strides) per dimension, outermost first.
using Shape = std::vector<int64_t>;

/// A borrowed list of int64 (sizes, dims, strides) for parameters: binds to a braced list
/// `{2, 3}`, a Shape or a span without copying. Valid for the full expression of the call.
class IntList {
public:
  constexpr IntList() = default;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime" // borrowed for the call, by design
#endif
  constexpr IntList(std::initializer_list<int64_t> l)
      : data_(l.begin()), size_(l.size()) {} // NOLINT
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  IntList(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}        // NOLINT
  constexpr IntList(std::span<const int64_t> s) : data_(s.data()), size_(s.size()) {} // NOLINT
  constexpr IntList(const int64_t* data, size_t size) : data_(data), size_(size) {}

  constexpr const int64_t* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const int64_t* begin() const { return data_; }
  constexpr const int64_t* end() const { return data_ + size_; }
  constexpr int64_t operator[](size_t i) const { return data_[i]; }
  constexpr int64_t front() const { return data_[0]; }
  constexpr int64_t back() const { return data_[size_ - 1]; }
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  friend bool operator==(IntList a, IntList b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)
      if (a.data_[i] != b.data_[i]) return false;
    return true;
  }

private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

/// Row-major strides of a contiguous tensor of these sizes.
Shape contiguous_strides(IntList sizes);
/// Channels-last (NHWC) strides of a 4-D [N, C, H, W] tensor: channels innermost, then W, H, N.
Shape channels_last_strides(IntList sizes);
/// True when strides describe a dense layout: a row-major layout of the dims in some order,
/// so the elements fill exactly numel slots (size-1 dims may have any stride).
bool is_dense(IntList sizes, IntList strides);
/// Product of sizes; throws kiln::Error on a negative size or on overflow of int64.
int64_t checked_numel(IntList sizes, const char* op = "tensor");
/// numel without checks (sizes already validated).
int64_t numel_of(IntList sizes);
/// True when strides describe a row-major dense layout (size-1 dims may have any stride).
bool is_contiguous(IntList sizes, IntList strides);
/// The broadcast of two shapes (numpy rules); throws naming op and both shapes.
Shape broadcast_shapes(IntList a, IntList b, const char* op);
/// Wraps a possibly negative dim into [0, rank); throws naming op when out of range.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);
/// "[2, 3]".
std::string shape_str(IntList s);

std::ostream& operator<<(std::ostream& os, const Shape& s);

} // namespace kiln
