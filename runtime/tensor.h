// Tensor: the user-facing handle to a TensorImpl, with its metadata accessors and op methods.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/error.h"
#include "runtime/scalar.h"
#include "runtime/tensor_impl.h"

namespace kiln {

/// dtype + device + requires_grad for factories: randn({4}, TensorOptions().dtype(DType::bf16)).
struct TensorOptions {
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
  TensorOptions() = default;
  TensorOptions(DType t) : dtype_(t) {}   // NOLINT(google-explicit-constructor)
  TensorOptions(Device d) : device_(d) {} // NOLINT(google-explicit-constructor)
  TensorOptions dtype(DType t) const {
    auto o = *this;
    o.dtype_ = t;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r = true) const {
    auto o = *this;
    o.requires_grad_ = r;
    return o;
  }
};

class Tensor {
public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().sizes; }
  const Shape& sizes() const { return impl().sizes; }
  int64_t size(int64_t dim) const;
  const Shape& strides() const { return impl().strides; }
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  int64_t numel() const { return impl().numel(); }
  int64_t storage_offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  int64_t itemsize() const { return kiln::itemsize(dtype()); }
  bool is_contiguous() const { return kiln::is_contiguous(sizes(), strides()); }
  bool is_traced() const { return impl().is_traced(); }
  /// The version counter shared with every view of the same storage.
  uint64_t version() const;
  /// Pointer to the first element (storage data + offset); throws for a traced tensor.
  void* raw_data() const;
  template <typename T> T* data_ptr() const {
    KILN_CHECK(dtype_of_v<T> == dtype(), "data_ptr: tensor has dtype ", dtype(), ", not ",
               dtype_of_v<T>);
    return static_cast<T*>(raw_data());
  }
  TensorImpl& impl() const {
    KILN_CHECK(impl_ != nullptr, "use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// True when both handles refer to the same TensorImpl.
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- autograd flags ----
  bool requires_grad() const { return impl().requires_grad; }
  /// Marks a leaf as requiring grad (or not; a result of recorded ops stays as it is).
  Tensor& requires_grad_(bool r = true);
  /// The gradient accumulated by backward (leaves, and tensors after retain_grad()).
  Tensor grad() const;
  void set_grad(const Tensor& g);
  /// Runs backward from this tensor (runtime/autograd/autograd.h): `gradient` is its own
  /// (implied ones for a one-element tensor); retain_graph keeps the graph for another
  /// backward (default: create_graph); create_graph records the backward pass itself.
  void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  /// Keeps this non-leaf tensor's gradient in grad() at the next backward.
  Tensor& retain_grad();
  /// Not the result of a recorded op.
  bool is_leaf() const;

  // ---- host reads ----
  /// The value of a one-element tensor, converted to T.
  template <typename T> T item() const;
  /// All elements in row-major order, converted to T.
  template <typename T> std::vector<T> to_vector() const;
  /// True when the one-element tensor is nonzero: `if (x.sum() > 0)`.
  explicit operator bool() const;

  // ---- views (share storage) ----
  Tensor view(IntList sizes) const;
  Tensor reshape(IntList sizes) const;
  Tensor permute(IntList dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor expand(IntList sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  Tensor detach() const;
  /// Views of `split_size` along dim (the last one shorter), as torch::Tensor::split.
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  /// `chunks` views along dim of ceil(size / chunks) (fewer when they run out).
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;

  // ---- conversions ----
  Tensor to(DType t) const;
  Tensor to(Device d) const;
  Tensor clone() const;

  // ---- pointwise ----
  Tensor add(const Tensor& o) const;
  Tensor sub(const Tensor& o) const;
  Tensor mul(const Tensor& o) const;
  Tensor div(const Tensor& o) const;
  Tensor pow(const Tensor& o) const;
  Tensor pow(Scalar e) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu() const;
  Tensor silu() const;
  Tensor erf() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  /// The lower (upper) triangle of the last two dims from `diagonal`, the rest zero.
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;

  // ---- reductions ----
  Tensor sum(IntList dims = {}, bool keepdim = false) const;
  Tensor mean(IntList dims = {}, bool keepdim = false) const;
  Tensor max(IntList dims = {}, bool keepdim = false) const;
  Tensor min(IntList dims = {}, bool keepdim = false) const;
  Tensor prod(IntList dims = {}, bool keepdim = false) const;
  Tensor var(IntList dims = {}, bool keepdim = false, int64_t correction = 1) const;
  Tensor std(IntList dims = {}, bool keepdim = false, int64_t correction = 1) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // ---- linear algebra ----
  Tensor matmul(const Tensor& o) const;

  // ---- in place (bump the version counter) ----
  Tensor& add_(const Tensor& o);
  Tensor& add_(Scalar o);
  Tensor& sub_(const Tensor& o);
  Tensor& sub_(Scalar o);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(Scalar o);
  Tensor& div_(const Tensor& o);
  Tensor& div_(Scalar o);
  Tensor& relu_();
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);
  Tensor& masked_fill_(const Tensor& mask, Scalar value);
  Tensor& fill_(Scalar v);
  Tensor& zero_();
  /// Copies src (broadcast and cast to this tensor's dtype) into this tensor.
  Tensor& copy_(const Tensor& src);

private:
  std::shared_ptr<TensorImpl> impl_;
};

/// Prints like PyTorch: tensor([[1., 2.], [3., 4.]]) with dtype when not the default.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

} // namespace kiln
