// The hook the tracing frontend installs in the runtime: while a function is traced on a
// thread, every primitive dispatched there is recorded instead of run, and every host read
// of tensor data is reported (a graph break when the data is not yet computed).
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/ops/op.h"

namespace kiln {

namespace nn {
class Module;
}

/// Why the host needs tensor data: each is a graph-break cause (docs/graph-breaks.md).
enum class HostRead : uint8_t {
  item,           // Tensor::item()
  to_vector,      // Tensor::to_vector()
  condition,      // explicit operator bool: if (t), while (x.sum() > 0)
  print,          // std::cout << t
  data_pointer,   // data_ptr() / raw_data()
  nonzero,        // an output shape that depends on the data
  masked_select,  // boolean-mask indexing
  explicit_break, // kiln::graph_break()
  eager_region,   // kiln::eager_region(...)
  host_state,     // host state a replay could not reproduce changes (an LR scheduler's step)
};

/// Implemented by frontend/; the runtime only calls it.
class Tracer {
public:
  virtual ~Tracer() = default;
  /// Records one primitive call on the pending graph and returns its (traced) results; with
  /// `out`, the in-place form: the result is written into out (which is returned).
  virtual std::vector<Tensor> record(Op op, std::span<const Tensor> inputs, const Attrs& attrs,
                                     std::span<Tensor> out) = 0;
  /// The host is about to read `t`'s data (t may be null for graph_break/eager_region). When
  /// the data is pending, the graph is cut and run first, and `t` is concrete on return.
  virtual void host_read(const Tensor* t, HostRead why) = 0;
  /// The traced code asked module m whether it is training (dropout, batch norm do): the
  /// trace holds only while *flag keeps its value.
  virtual void module_mode_read(const nn::Module& m, const std::shared_ptr<const bool>& flag) = 0;
  /// The traced code reads (Tensor::grad) or replaces (Tensor::set_grad) the gradient slot
  /// of `t`: a replay must bind what the slot holds at its call, and set what it held at
  /// the end of the trace.
  virtual void grad_slot(const Tensor& t, bool write) = 0;
  /// `impl` shares the trace handle of a traced tensor (a copy of its metadata made outside
  /// dispatch, as autograd's saved outputs are): it is made concrete with the others.
  virtual void track(const std::shared_ptr<TensorImpl>& impl) = 0;
  /// t's version as the pending graph has it: its writes so far (a traced tensor), or its
  /// storage's version plus the writes recorded but not yet run (a concrete one). Autograd's
  /// saved tensors check it, as they check Tensor::version() eagerly.
  virtual uint64_t version(const TensorImpl& t) = 0;
  /// Whether a and b (traced or concrete) are views of one tensor's memory, as
  /// shares_storage tells of concrete tensors: an in-place write to one changes the other.
  virtual bool aliases(const TensorImpl& a, const TensorImpl& b) = 0;
  /// The pending graph's number: versions compare only within one.
  virtual int64_t segment_id() = 0;
};

/// The tracer active on this thread, or null.
Tracer* active_tracer();

/// Installs `t` (null suspends tracing) for the scope; restores the previous one after.
class TracerScope {
public:
  explicit TracerScope(Tracer* t);
  ~TracerScope();
  TracerScope(const TracerScope&) = delete;
  TracerScope& operator=(const TracerScope&) = delete;

private:
  Tracer* saved_;
};

/// Reports a host read to the active tracer (nothing when none is active), then suspends
/// tracing for the scope, so the read itself runs eagerly on concrete data.
class HostReadScope {
public:
  HostReadScope(const Tensor* t, HostRead why);

private:
  TracerScope suspend_;
};

/// Forces a graph break here when called under kiln::compile (a no-op in eager code).
void graph_break();

/// Runs fn eagerly: under kiln::compile the pending graph is cut first and fn's ops run on
/// the eager kernels, untraced; tracing resumes on what fn returns.
template <typename Fn> decltype(auto) eager_region(Fn&& fn) {
  HostReadScope scope(nullptr, HostRead::eager_region);
  return std::forward<Fn>(fn)();
}

} // namespace kiln
