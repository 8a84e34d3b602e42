// The one dispatch point every primitive goes through: inference, output allocation,
// in-place/out= handling, and the tracing hook.
#pragma once

#include <span>
#include <vector>

#include "runtime/ops/op.h"

namespace kiln {

/// Runs a primitive: infers output metadata, allocates contiguous outputs (or checks and
/// writes `out` for in-place/out= calls, bumping its version), and calls the kernel.
std::vector<Tensor> dispatch(Op op, std::span<const Tensor> inputs, const Attrs& attrs = {},
                             std::span<Tensor> out = {});
/// dispatch for single-output ops.
Tensor dispatch1(Op op, std::span<const Tensor> inputs, const Attrs& attrs = {});
inline Tensor dispatch1(Op op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {}) {
  return dispatch1(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}
/// Runs op writing into `self` (in-place form, e.g. add_): the result must have self's
/// shape and a dtype that casts to self's dtype without loss of kind.
void dispatch_inplace(Op op, Tensor& self, std::span<const Tensor> inputs, const Attrs& attrs = {});
inline void dispatch_inplace(Op op, Tensor& self, std::initializer_list<Tensor> inputs,
                             const Attrs& attrs = {}) {
  dispatch_inplace(op, self, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

/// The device factory and random ops make their tensors on while one is alive on this
/// thread (the CPU otherwise): the factories of the API (runtime/api/factory.cpp) set it from
/// their TensorOptions, for their eager call and their traced node alike.
class FactoryDevice {
public:
  explicit FactoryDevice(Device d);
  ~FactoryDevice();
  FactoryDevice(const FactoryDevice&) = delete;
  FactoryDevice& operator=(const FactoryDevice&) = delete;
  static Device current();

private:
  Device previous_;
};

/// A device's eager kernels: runs a non-view op whose operands or results are on the device
/// (`results`: their inferred metadata), writing `out` when given (then returning it).
/// dispatch() calls them for such ops; without them such an op is an error.
using DeviceKernels = std::vector<Tensor> (*)(Op op, std::span<const Tensor> inputs,
                                              const Attrs& attrs,
                                              std::span<const TensorMeta> results,
                                              std::span<Tensor> out);
/// Registers a device type's eager kernels (codegen/cuda/eager.h registers CUDA's).
void register_device_kernels(DeviceType type, DeviceKernels kernels);

/// The checks every call of a primitive gets before inference, eager or traced: the tensor
/// count, the attribute count, defined inputs, one device.
void check_call(const OpSchema& s, std::span<const Tensor> inputs, const Attrs& attrs);

/// The checks for writing a result of these sizes and dtype into `out` (in place or out=),
/// eager or traced: same sizes, no element of out aliasing another (fill_ excepted), and a
/// dtype that casts without loss of kind (copy_ excepted: it converts).
void check_out(const OpSchema& s, IntList sizes, DType dtype, const Tensor& out);

/// A Scalar operand as a 0-d "wrapped number" tensor (f64, i64 or bool).
Tensor wrap_scalar(Scalar s);

/// PyTorch's result_type over operands: dim-ful tensors, then 0-d tensors, then wrapped
/// numbers, where the later tiers only raise the category (bool < integer < float).
DType result_type(std::span<const TensorMeta> operands);
/// Whether a value of dtype `from` may be written into a tensor of dtype `to` in place
/// (PyTorch's can_cast: no float → integer, no number → bool).
bool can_cast(DType from, DType to);

/// Whether a and b are the same elements: one storage, offset, sizes, strides and dtype.
bool same_view(const Tensor& a, const Tensor& b);
/// Whether a and b are views of one storage.
bool shares_storage(const Tensor& a, const Tensor& b);

/// A tensor of these sizes with contiguous strides and fresh storage.
Tensor make_tensor(IntList sizes, DType dtype, Device device = Device::cpu());
/// A view of base's storage with the given metadata (same version counter).
Tensor make_view(const Tensor& base, IntList sizes, IntList strides, int64_t offset);

} // namespace kiln
