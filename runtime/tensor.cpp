// Tensor: metadata accessors, host reads, and the op methods (which call the free functions).
#include "runtime/tensor.h"

#include <cstring>

#include "runtime/autograd/node.h"
#include "runtime/cuda/device.h"
#include "runtime/grad_mode.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/tracing.h"

namespace kiln {

int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }

uint64_t Tensor::version() const {
  const TensorImpl& i = impl();
  return i.storage ? i.storage->version() : 0;
}

void* Tensor::raw_data() const {
  if (active_tracer() != nullptr) [[unlikely]] {
    HostReadScope read(this, HostRead::data_pointer);
  }
  const TensorImpl& i = impl();
  KILN_CHECK(!i.is_traced(), "the data of a traced tensor is not available outside the "
                             "compiled call that traced it");
  KILN_CHECK(i.storage != nullptr, "tensor has no storage");
  return static_cast<char*>(i.storage->data()) + i.offset * kiln::itemsize(i.dtype);
}

Tensor& Tensor::requires_grad_(bool r) {
  KILN_CHECK(!r || is_floating(dtype()),
             "requires_grad_: only floating-point tensors can require "
             "gradients, got ",
             dtype());
  KILN_CHECK(!r || !impl().inference, "requires_grad_: an inference tensor (made under "
                                      "InferenceMode) can't require grad");
  KILN_CHECK(r || is_leaf(), "requires_grad_: only a leaf's flag can be changed (use detach() "
                             "for a tensor without history)");
  impl().requires_grad = r;
  return *this;
}

Tensor Tensor::grad() const {
  if (Tracer* tracer = active_tracer()) [[unlikely]]
    tracer->grad_slot(*this, /*write=*/false);
  return Tensor(impl().grad);
}
void Tensor::set_grad(const Tensor& g) {
  if (Tracer* tracer = active_tracer()) [[unlikely]]
    tracer->grad_slot(*this, /*write=*/true);
  impl().grad = g.impl_ptr();
}

template <typename T> T Tensor::item() const {
  HostReadScope read(this, HostRead::item);
  KILN_CHECK(numel() == 1, "item: a tensor with ", numel(), " elements (shape ", shape_str(sizes()),
             ") cannot be converted to a scalar");
  return to_vector<T>()[0];
}

template <typename T> std::vector<T> Tensor::to_vector() const {
  HostReadScope read(this, HostRead::to_vector);
  const Tensor host = device().is_cpu() ? *this : to(Device::cpu());
  Tensor c = kiln::to(host, dtype_of_v<T>).contiguous();
  std::vector<T> out(static_cast<size_t>(c.numel()));
  if (out.empty()) return out;
  if constexpr (std::is_same_v<T, bool>) { // std::vector<bool> packs bits
    const auto* p = static_cast<const uint8_t*>(c.raw_data());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = p[i] != 0;
  } else {
    std::memcpy(static_cast<void*>(out.data()), c.raw_data(), out.size() * sizeof(T));
  }
  return out;
}

#define KILN_INSTANTIATE(T)                                                                        \
  template T Tensor::item<T>() const;                                                              \
  template std::vector<T> Tensor::to_vector<T>() const;
KILN_FOR_EACH_ELEMENT_TYPE(KILN_INSTANTIATE)
#undef KILN_INSTANTIATE

Tensor::operator bool() const {
  HostReadScope read(this, HostRead::condition);
  KILN_CHECK(numel() == 1, "bool: a tensor with ", numel(), " elements (shape ", shape_str(sizes()),
             ") is ambiguous as a condition; use any()/all() style reductions");
  return item<bool>();
}

// ---- views ----
Tensor Tensor::view(IntList s) const { return kiln::view(*this, s); }
Tensor Tensor::reshape(IntList s) const { return kiln::reshape(*this, s); }
Tensor Tensor::permute(IntList d) const { return kiln::permute(*this, d); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return kiln::transpose(*this, a, b); }
Tensor Tensor::t() const {
  KILN_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dims, got shape ", shape_str(sizes()));
  return dim() < 2 ? *this : transpose(0, 1);
}
Tensor Tensor::expand(IntList s) const { return kiln::expand(*this, s); }
Tensor Tensor::unsqueeze(int64_t d) const { return kiln::unsqueeze(*this, d); }
Tensor Tensor::squeeze() const { return kiln::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return kiln::squeeze(*this, d); }
Tensor Tensor::slice(int64_t d, int64_t s, int64_t e, int64_t st) const {
  return kiln::slice(*this, d, s, e, st);
}
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const {
  return kiln::narrow(*this, d, s, l);
}
Tensor Tensor::select(int64_t d, int64_t index) const {
  int64_t dd = wrap_dim(d, dim(), "select");
  int64_t n = size(dd);
  KILN_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dim ", d,
             " of size ", n);
  if (index < 0) index += n;
  return slice(dd, index, index + 1).squeeze(dd);
}
Tensor Tensor::flatten(int64_t s, int64_t e) const { return kiln::flatten(*this, s, e); }
Tensor Tensor::contiguous() const { return kiln::contiguous(*this); }
Tensor Tensor::detach() const {
  // A traced tensor's alias is a node of its graph, so that it is materialised with it.
  if (is_traced()) return kiln::view(*this, sizes());
  return make_view(*this, sizes(), strides(), storage_offset());
}

// ---- conversions ----
Tensor Tensor::to(DType t) const { return kiln::to(*this, t); }
namespace {

/// t's data on device d (a new tensor without history).
Tensor move_to(const Tensor& t, Device d) {
  if (!t.device().is_cpu() && !d.is_cpu()) return move_to(move_to(t, Device::cpu()), d);
  if (!t.device().is_cpu() && !t.is_contiguous()) {
    // A strided device tensor: the span of its storage it covers comes to the host, and the
    // host makes it contiguous.
    int64_t span = 1;
    for (size_t d2 = 0; d2 < t.sizes().size(); ++d2) {
      KILN_CHECK(t.strides()[d2] >= 0, "to: a ", t.device(), " tensor with a negative stride");
      if (t.sizes()[d2] == 0) span = 0;
      if (span > 0) span += (t.sizes()[d2] - 1) * t.strides()[d2];
    }
    Tensor host = make_tensor({span}, t.dtype(), d);
    if (span > 0)
      cuda::detail::copy_to_host(host.raw_data(), static_cast<const char*>(t.raw_data()),
                                 static_cast<size_t>(span * t.itemsize()), t.device());
    return make_view(host, t.sizes(), t.strides(), 0).contiguous();
  }
  const Tensor src = t.device().is_cpu() ? t.contiguous() : t;
  Tensor out = make_tensor(t.sizes(), t.dtype(), d);
  out.impl().wrapped_number = t.impl().wrapped_number; // a C++ scalar operand stays one
  const size_t bytes = static_cast<size_t>(t.numel() * t.itemsize());
  if (bytes > 0) {
    if (d.is_cuda())
      cuda::detail::copy_to_device(out.raw_data(), src.raw_data(), bytes, d);
    else
      cuda::detail::copy_to_host(out.raw_data(), src.raw_data(), bytes, t.device());
  }
  return out;
}

} // namespace

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  KILN_CHECK(!is_traced(), "to: moving a traced tensor to ", d, " (not in compiled code yet)");
  Tensor moved = move_to(*this, d);
  // Differentiable, as PyTorch's: the gradient goes back to this device.
  if (requires_grad() && is_grad_enabled()) autograd::record_move(*this, moved);
  return moved;
}
Tensor Tensor::clone() const { return kiln::clone(*this); }

// ---- pointwise ----
Tensor Tensor::add(const Tensor& o) const { return kiln::add(*this, o); }
Tensor Tensor::sub(const Tensor& o) const { return kiln::sub(*this, o); }
Tensor Tensor::mul(const Tensor& o) const { return kiln::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return kiln::div(*this, o); }
Tensor Tensor::pow(const Tensor& o) const { return kiln::pow(*this, o); }
Tensor Tensor::pow(Scalar e) const { return kiln::pow(*this, e); }
Tensor Tensor::neg() const { return kiln::neg(*this); }
Tensor Tensor::abs() const { return kiln::abs(*this); }
Tensor Tensor::exp() const { return kiln::exp(*this); }
Tensor Tensor::log() const { return kiln::log(*this); }
Tensor Tensor::sqrt() const { return kiln::sqrt(*this); }
Tensor Tensor::rsqrt() const { return kiln::rsqrt(*this); }
Tensor Tensor::sin() const { return kiln::sin(*this); }
Tensor Tensor::cos() const { return kiln::cos(*this); }
Tensor Tensor::tanh() const { return kiln::tanh(*this); }
Tensor Tensor::sigmoid() const { return kiln::sigmoid(*this); }
Tensor Tensor::relu() const { return kiln::relu(*this); }
Tensor Tensor::gelu() const { return kiln::gelu(*this); }
Tensor Tensor::silu() const { return kiln::silu(*this); }
Tensor Tensor::erf() const { return kiln::erf(*this); }
Tensor Tensor::floor() const { return kiln::floor(*this); }
Tensor Tensor::ceil() const { return kiln::ceil(*this); }
Tensor Tensor::round() const { return kiln::round(*this); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  return kiln::clamp(*this, lo, hi);
}
Tensor Tensor::masked_fill(const Tensor& m, Scalar v) const {
  return kiln::masked_fill(*this, m, v);
}

// ---- reductions ----
Tensor Tensor::sum(IntList d, bool k) const { return kiln::sum(*this, d, k); }
Tensor Tensor::mean(IntList d, bool k) const { return kiln::mean(*this, d, k); }
Tensor Tensor::max(IntList d, bool k) const { return kiln::max(*this, d, k); }
Tensor Tensor::min(IntList d, bool k) const { return kiln::min(*this, d, k); }
Tensor Tensor::prod(IntList d, bool k) const { return kiln::prod(*this, d, k); }
Tensor Tensor::var(IntList d, bool k, int64_t c) const { return kiln::var(*this, d, k, c); }
Tensor Tensor::std(IntList d, bool k, int64_t c) const { return kiln::std(*this, d, k, c); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return kiln::argmax(*this, d, k); }
Tensor Tensor::argmin(std::optional<int64_t> d, bool k) const { return kiln::argmin(*this, d, k); }
Tensor Tensor::cumsum(int64_t d) const { return kiln::cumsum(*this, d); }
std::vector<Tensor> Tensor::split(int64_t size, int64_t d) const {
  return kiln::split(*this, size, d);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  return kiln::chunk(*this, chunks, d);
}
Tensor Tensor::tril(int64_t diagonal) const { return kiln::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return kiln::triu(*this, diagonal); }
Tensor Tensor::softmax(int64_t d) const { return kiln::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return kiln::log_softmax(*this, d); }
Tensor Tensor::matmul(const Tensor& o) const { return kiln::matmul(*this, o); }

// ---- in place ----
Tensor& Tensor::add_(const Tensor& o) {
  dispatch_inplace(Op::add, *this, {*this, o});
  return *this;
}
Tensor& Tensor::add_(Scalar o) {
  dispatch_inplace(Op::add, *this, {*this, wrap_scalar(o)});
  return *this;
}
Tensor& Tensor::sub_(const Tensor& o) {
  dispatch_inplace(Op::sub, *this, {*this, o});
  return *this;
}
Tensor& Tensor::sub_(Scalar o) {
  dispatch_inplace(Op::sub, *this, {*this, wrap_scalar(o)});
  return *this;
}
Tensor& Tensor::mul_(const Tensor& o) {
  dispatch_inplace(Op::mul, *this, {*this, o});
  return *this;
}
Tensor& Tensor::mul_(Scalar o) {
  dispatch_inplace(Op::mul, *this, {*this, wrap_scalar(o)});
  return *this;
}
Tensor& Tensor::div_(const Tensor& o) {
  dispatch_inplace(Op::div, *this, {*this, o});
  return *this;
}
Tensor& Tensor::div_(Scalar o) {
  dispatch_inplace(Op::div, *this, {*this, wrap_scalar(o)});
  return *this;
}
Tensor& Tensor::relu_() {
  dispatch_inplace(Op::relu, *this, {*this});
  return *this;
}
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  // copy_ would truncate a float result (int clamped to 1.5) silently; in place refuses it.
  Tensor r = kiln::clamp(*this, lo, hi);
  KILN_CHECK(can_cast(r.dtype(), dtype()), "clamp_: result type ", r.dtype(),
             " can't be cast to the desired output type ", dtype());
  return copy_(r);
}
Tensor& Tensor::masked_fill_(const Tensor& m, Scalar v) {
  return copy_(kiln::masked_fill(*this, m, v));
}
Tensor& Tensor::fill_(Scalar v) {
  dispatch_inplace(Op::full, *this, {}, Attrs{sizes(), v, dtype()});
  return *this;
}
Tensor& Tensor::zero_() { return fill_(0); }
Tensor& Tensor::copy_(const Tensor& src) {
  Tensor s = src.sizes() == sizes() ? src : kiln::expand(src, sizes());
  dispatch_inplace(Op::copy, *this, {s});
  return *this;
}

} // namespace kiln
