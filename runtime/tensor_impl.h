// TensorImpl: a tensor's metadata plus either its storage (concrete) or a graph value (traced).
#pragma once

#include <memory>

#include "runtime/allocator.h"
#include "runtime/dtype.h"
#include "runtime/shape.h"

namespace kiln {

namespace autograd {
struct AutogradMeta; // runtime/autograd/node.h
}

/// What the tracing frontend attaches to a traced tensor: a handle to the value of the
/// pending graph that will hold it. Defined by frontend/; the runtime only carries it.
struct TraceHandle {
  virtual ~TraceHandle() = default;
};

struct TensorImpl {
  Shape sizes;
  Shape strides;      // in elements
  int64_t offset = 0; // in elements, into storage
  DType dtype = DType::f32;
  Device device;
  std::shared_ptr<Storage> storage;   // null for a traced tensor
  std::shared_ptr<TraceHandle> trace; // non-null for a traced tensor
  bool requires_grad = false;
  /// A Scalar operand wrapped as a 0-d tensor: it takes part in type promotion only by its
  /// kind (float/int/bool), like a Python number in PyTorch.
  bool wrapped_number = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::AutogradMeta> autograd; // its history (runtime/autograd)
  bool inference = false; // made under InferenceMode: never joins an autograd graph
  /// A view made with grad mode off (or a view of one): its base is not known to autograd,
  /// so a recorded in-place write through it is an error (PyTorch's CreationMeta::NO_GRAD_MODE).
  bool no_grad_view = false;

  bool is_traced() const { return trace != nullptr; }
  int64_t numel() const { return numel_of(sizes); }
};

} // namespace kiln
