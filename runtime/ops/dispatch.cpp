// The dispatch point: inference → allocation (or out= checks) → kernel.
#include "runtime/ops/dispatch.h"

#include <atomic>
#include <optional>

#include "runtime/autograd/node.h"
#include "runtime/error.h"
#include "runtime/grad_mode.h"
#include "runtime/tracing.h"

namespace kiln {

TensorMeta TensorMeta::of(const Tensor& t) {
  const TensorImpl& i = t.impl();
  return {i.dtype, i.device, i.sizes, i.strides, i.wrapped_number};
}

Tensor make_tensor(IntList sizes, DType dtype, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes.assign(sizes.begin(), sizes.end());
  int64_t n = checked_numel(sizes);
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  impl->device = device;
  int64_t nbytes = 0;
  KILN_CHECK(!__builtin_mul_overflow(n, itemsize(dtype), &nbytes), "tensor of shape ",
             shape_str(sizes), " is too large");
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(nbytes), device);
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, IntList sizes, IntList strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  const TensorImpl& b = base.impl();
  impl->sizes.assign(sizes.begin(), sizes.end());
  impl->strides.assign(strides.begin(), strides.end());
  impl->offset = offset;
  impl->dtype = b.dtype;
  impl->device = b.device;
  impl->storage = b.storage;
  impl->trace = b.trace;
  return Tensor(std::move(impl));
}

Tensor wrap_scalar(Scalar s) {
  DType t = s.is_floating() ? DType::f64 : s.is_integral() ? DType::i64 : DType::bool_;
  Tensor out = make_tensor({}, t);
  out.impl().wrapped_number = true; // first: a tracer sees the write below as a scalar's
  if (t == DType::f64)
    *static_cast<double*>(out.raw_data()) = s.to_double();
  else if (t == DType::i64)
    *static_cast<int64_t*>(out.raw_data()) = s.to_int();
  else
    *static_cast<bool*>(out.raw_data()) = s.to_int() != 0;
  return out;
}

namespace {

enum class Category { none, boolean, integral, floating };

Category category(DType t) {
  return t == DType::bool_ ? Category::boolean
         : is_floating(t)  ? Category::floating
                           : Category::integral;
}

struct Tier {
  std::optional<DType> t;
  void add(DType d) { t = t ? promote_types(*t, d) : d; }
};

// PyTorch's combine_categories(higher, lower).
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::bool_ || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

/// PyTorch's has_internal_overlap == Yes: a dim of size > 1 with stride 0 (an expanded
/// view), where several elements share one memory location.
bool has_internal_overlap(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && t.sizes()[d] > 1) return true;
  return false;
}

/// A CPU scalar: a wrapped number, or a 0-d CPU tensor. It goes with tensors on any device
/// (as in PyTorch).
bool cpu_scalar(const Tensor& t) {
  return t.device().is_cpu() && (t.impl().wrapped_number || t.dim() == 0);
}

void check_devices(const OpSchema& s, std::span<const Tensor> inputs) {
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (cpu_scalar(inputs[i]) || cpu_scalar(inputs[0])) continue;
    KILN_CHECK(inputs[i].device() == inputs[0].device(), s.name,
               ": expected all tensors on one device, got ", inputs[0].device(), " and ",
               inputs[i].device());
  }
}

std::vector<TensorMeta> infer(const OpSchema& s, std::span<const Tensor> inputs,
                              const Attrs& attrs) {
  check_call(s, inputs, attrs);
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const Tensor& t : inputs)
    metas.push_back(TensorMeta::of(t));
  return s.infer(metas, attrs);
}

} // namespace

bool same_view(const Tensor& a, const Tensor& b) {
  return a.impl().storage == b.impl().storage && a.storage_offset() == b.storage_offset() &&
         a.sizes() == b.sizes() && a.strides() == b.strides() && a.dtype() == b.dtype();
}

bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.impl().storage != nullptr && a.impl().storage == b.impl().storage;
}

void check_call(const OpSchema& s, std::span<const Tensor> inputs, const Attrs& attrs) {
  KILN_CHECK(s.num_inputs < 0 ? !inputs.empty() : static_cast<int>(inputs.size()) == s.num_inputs,
             s.name, ": expected ",
             s.num_inputs < 0 ? std::string("at least 1") : std::to_string(s.num_inputs),
             " tensor inputs, got ", inputs.size());
  KILN_ASSERT(attrs.size() == s.attrs.size(), s.name, ": expected ", s.attrs.size(),
              " attributes, got ", attrs.size());
  for (const Tensor& t : inputs)
    KILN_CHECK(t.defined(), s.name, ": an input tensor is undefined");
  check_devices(s, inputs);
}

void check_out(const OpSchema& s, IntList sizes, DType dtype, const Tensor& out) {
  KILN_CHECK(out.sizes() == sizes, s.name, ": output with shape ", shape_str(out.sizes()),
             " doesn't match the broadcast shape ", shape_str(sizes));
  // Writing into an expanded view would give its shared elements whichever value came last.
  // Filling is idempotent, so fill_ on such a view is allowed (as in PyTorch).
  KILN_CHECK(s.op == Op::full || !has_internal_overlap(out), s.name,
             ": unsupported operation: more than one element of the written-to tensor (shape ",
             shape_str(out.sizes()), ", strides ", shape_str(out.strides()),
             ") refers to a single memory location; clone() it first");
  // copy converts between any dtypes itself (copy_ casts, as in PyTorch).
  KILN_CHECK(s.op == Op::copy || can_cast(dtype, out.dtype()), s.name, ": result type ", dtype,
             " can't be cast to the desired output type ", out.dtype());
}

DType result_type(std::span<const TensorMeta> operands) {
  Tier dim, zero, wrapped;
  for (const TensorMeta& m : operands) {
    if (m.wrapped_number)
      wrapped.add(is_floating(m.dtype) ? kDefaultFloat : m.dtype);
    else if (m.sizes.empty())
      zero.add(m.dtype);
    else
      dim.add(m.dtype);
  }
  auto r = combine(dim.t, combine(zero.t, wrapped.t));
  KILN_ASSERT(r.has_value(), "result_type of no operands");
  return *r;
}

bool can_cast(DType from, DType to) {
  Category f = category(from), t = category(to);
  if (f == Category::floating && t != Category::floating) return false;
  if (f != Category::boolean && t == Category::boolean) return false;
  return true;
}

namespace {

std::atomic<DeviceKernels> g_cuda_kernels{nullptr};

/// The device an op runs on: the first operand's or result's that is not on the CPU (a
/// wrapped number stays on the CPU beside device tensors); nullopt on the host.
std::optional<Device> device_of(std::span<const Tensor> inputs, std::span<const TensorMeta> metas,
                                std::span<const Tensor> out) {
  for (const Tensor& t : inputs)
    if (t.defined() && !t.device().is_cpu()) return t.device();
  for (const Tensor& t : out)
    if (t.defined() && !t.device().is_cpu()) return t.device();
  for (const TensorMeta& m : metas)
    if (!m.device.is_cpu()) return m.device;
  return std::nullopt;
}

} // namespace

namespace {

/// The op run by its kernels (the CPU's, or the device's), without autograd.
std::vector<Tensor> run_kernels(Op op, std::span<const Tensor> inputs, const Attrs& attrs,
                                std::span<Tensor> out) {
  const OpSchema& s = schema(op);
  std::vector<TensorMeta> metas = infer(s, inputs, attrs);
  KILN_ASSERT(static_cast<int>(metas.size()) == s.num_outputs, s.name, ": inference gave ",
              metas.size(), " outputs");
  std::vector<Tensor> results(metas.size());
  if (s.kind != OpKind::view) [[likely]] {
    if (std::optional<Device> d = device_of(inputs, metas, out)) [[unlikely]] {
      DeviceKernels kernels = g_cuda_kernels.load();
      KILN_CHECK(kernels != nullptr, s.name, ": operands on ", *d,
                 ": no CUDA kernels are registered (they come with kiln's code generator, "
                 "libkiln_codegen, built with CUDA)");
      return kernels(op, inputs, attrs, metas, out);
    }
  }
  if (s.kind == OpKind::view) {
    KILN_ASSERT(out.empty(), "view ops take no out= tensors");
    s.kernel(inputs, attrs, results);
    return results;
  }
  // Fresh outputs, unless the kernel writes the out= tensors directly (allocated only then,
  // so an in-place op on a large tensor does not hold a second one).
  auto allocate = [&] {
    for (size_t k = 0; k < metas.size(); ++k)
      results[k] = make_tensor(metas[k].sizes, metas[k].dtype, metas[k].device);
  };
  if (out.empty()) {
    allocate();
    s.kernel(inputs, attrs, results);
    return results;
  }
  // out= / in place: check the result fits the destination.
  KILN_ASSERT(out.size() == metas.size(), "out= count mismatch");
  bool direct = true;
  for (size_t k = 0; k < metas.size(); ++k) {
    check_out(s, metas[k].sizes, metas[k].dtype, out[k]);
    bool converts = op == Op::copy;
    if (!converts && out[k].dtype() != metas[k].dtype) direct = false;
    for (const Tensor& in : inputs)
      if (shares_storage(in, out[k]) && !same_view(in, out[k])) direct = false;
    // Only elementwise kernels write arbitrary strides; the others get a contiguous output.
    bool elementwise = s.kind == OpKind::pointwise || s.kind == OpKind::factory ||
                       s.kind == OpKind::random || op == Op::copy;
    if (!elementwise && !out[k].is_contiguous()) direct = false;
  }
  if (direct) {
    s.kernel(inputs, attrs, out);
  } else {
    // The destination overlaps an input in another layout, or needs a cast: compute into
    // fresh outputs first so no input element is overwritten before it is read.
    allocate();
    s.kernel(inputs, attrs, results);
    for (size_t k = 0; k < metas.size(); ++k)
      dispatch(Op::copy, std::span<const Tensor>(&results[k], 1), {}, out.subspan(k, 1));
    return std::vector<Tensor>(out.begin(), out.end());
  }
  for (Tensor& o : out)
    o.impl().storage->bump_version();
  return std::vector<Tensor>(out.begin(), out.end());
}

} // namespace

std::vector<Tensor> dispatch(Op op, std::span<const Tensor> inputs, const Attrs& attrs,
                             std::span<Tensor> out) {
  if (Tracer* tracer = active_tracer()) [[unlikely]] {
    // Traced ops are recorded for autograd as eager ones are, so that backward() inside a
    // compiled function traces the backward pass into the same graph.
    if (!is_grad_enabled()) {
      std::vector<Tensor> results = tracer->record(op, inputs, attrs, out);
      if (schema(op).kind == OpKind::view && !results.empty())
        results[0].impl().no_grad_view = true;
      return results;
    }
    autograd::Recording rec = autograd::record_before(op, inputs, out);
    std::vector<Tensor> results;
    {
      const NoGradGuard recorded;
      results = tracer->record(op, inputs, attrs, out);
    }
    if (rec.active) autograd::record_after(op, inputs, attrs, results, out, rec);
    if (schema(op).kind == OpKind::view && !results.empty())
      autograd::record_view(op, inputs[0], attrs, results[0]);
    return results;
  }
  if (!is_grad_enabled()) {
    std::vector<Tensor> results = run_kernels(op, inputs, attrs, out);
    if (autograd::inference_mode()) [[unlikely]]
      autograd::mark_inference(results);
    else if (schema(op).kind == OpKind::view && !results.empty())
      results[0].impl().no_grad_view = true;
    return results;
  }
  // Recorded for autograd when an operand requires grad; the kernels themselves (which may
  // dispatch ops of their own) record nothing.
  autograd::Recording rec = autograd::record_before(op, inputs, out);
  std::vector<Tensor> results;
  {
    const NoGradGuard kernels;
    results = run_kernels(op, inputs, attrs, out);
  }
  if (rec.active) autograd::record_after(op, inputs, attrs, results, out, rec);
  if (schema(op).kind == OpKind::view && !results.empty())
    autograd::record_view(op, inputs[0], attrs, results[0]);
  return results;
}

namespace {
thread_local Device t_factory_device = Device::cpu();
}

FactoryDevice::FactoryDevice(Device d) : previous_(t_factory_device) { t_factory_device = d; }
FactoryDevice::~FactoryDevice() { t_factory_device = previous_; }
Device FactoryDevice::current() { return t_factory_device; }

void register_device_kernels(DeviceType type, DeviceKernels kernels) {
  KILN_CHECK(type == DeviceType::cuda, "register_device_kernels: only CUDA has device kernels");
  g_cuda_kernels.store(kernels);
}

Tensor dispatch1(Op op, std::span<const Tensor> inputs, const Attrs& attrs) {
  return std::move(dispatch(op, inputs, attrs)[0]);
}

void dispatch_inplace(Op op, Tensor& self, std::span<const Tensor> inputs, const Attrs& attrs) {
  dispatch(op, inputs, attrs, std::span<Tensor>(&self, 1));
}

} // namespace kiln
