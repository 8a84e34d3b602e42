// The autograd graph (runtime/autograd/autograd.h): nodes, edges, saved tensors and the
// autograd state a tensor carries. Internal to the runtime.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/ops/op.h"
#include "runtime/tensor.h"

namespace kiln::autograd {

class Node;

/// Where a gradient flows: output `output_nr` of the node that made a value (its grad_fn, or
/// a leaf's AccumulateGrad).
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t output_nr = 0;
  bool valid() const { return fn != nullptr; }
};

/// A tensor kept for backward with the version its storage had: unpacking it after an in-place
/// write is an error naming the node. An output of its own node is kept without its history
/// (no reference cycle) and gets it back when unpacked.
class SavedTensor {
public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output);
  Tensor unpack(const std::shared_ptr<Node>& owner) const;
  bool defined() const { return data_.defined(); }
  /// The saved tensor itself (no version check, no history).
  const Tensor& data() const { return data_; }
  void reset() { data_ = Tensor(); }

private:
  Tensor data_;
  uint64_t version_ = 0;
  /// Saved while a tracer ran: its pending graph's number, whose versions version_ counts
  /// (-1: saved eagerly, version_ is the storage's).
  int64_t segment_ = -1;
  bool is_output_ = false;
  uint32_t output_nr_ = 0;
};

/// A backward function: the gradients of its inputs (one per edge in `next`; undefined for
/// none) from those of its outputs (undefined where no gradient reached them).
class Node : public std::enable_shared_from_this<Node> {
public:
  virtual ~Node() = default;
  virtual std::vector<Tensor> apply(std::vector<Tensor> grads) = 0;
  virtual std::string name() const = 0;
  /// Drops the saved tensors (after a backward without retain_graph).
  virtual void release() {}
  /// Appends the tensors it saved for backward (as saved: without history).
  virtual void saved(std::vector<Tensor>& out) const { (void)out; }
  virtual bool released() const { return false; }

  std::vector<Edge> next;          // per input
  std::vector<TensorMeta> outputs; // sizes, dtype, device of each output
  uint64_t sequence = 0;           // creation order: later nodes run first
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained; // retain_grad()
};

/// Accumulates into a leaf's .grad().
class AccumulateGrad final : public Node {
public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(std::vector<Tensor> grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

private:
  std::shared_ptr<TensorImpl> leaf_;
};

/// One view op of the way from a view's base to the view.
struct ViewStep {
  Op op = Op::view;
  Attrs attrs;
  TensorMeta input; // what it was applied to
};

/// What a tensor carries for autograd.
struct AutogradMeta {
  std::shared_ptr<Node> grad_fn;   // null for a leaf
  uint32_t output_nr = 0;          // which output of grad_fn
  std::weak_ptr<Node> accumulator; // a leaf's AccumulateGrad, while a graph holds it
  /// A view made with grad mode on (PyTorch's `_base`): the tensor it views (never a view
  /// itself), the view ops from there, and the base's grad_fn when the view's own history was
  /// last derived. A recorded in-place write to the base or to any of its views gives the base
  /// a new grad_fn; the view's history is then derived again (refresh_view) before it is used.
  std::shared_ptr<TensorImpl> view_base;
  std::shared_ptr<const std::vector<ViewStep>> view_steps;
  std::shared_ptr<Node> view_of_fn;
};

/// t's autograd state, made when missing.
AutogradMeta& meta_of(const Tensor& t);
/// t's autograd state, or null.
AutogradMeta* find_meta(const Tensor& t);
/// A view whose base's history changed since its own was derived (an in-place write through
/// another view, or to the base) gets it derived again: the view ops replayed on the base.
void refresh_view(const Tensor& t);
/// Drops a view's link to its base (its history stays as it is).
inline void forget_view_base(AutogradMeta& m) {
  m.view_base.reset();
  m.view_steps.reset();
  m.view_of_fn.reset();
}
/// Notes that `view` was made from `input` by a view op (called by dispatch with grad mode
/// on): its base and the view ops from there (AutogradMeta::view_base).
void record_view(Op op, const Tensor& input, const Attrs& attrs, const Tensor& view);
/// The edge a gradient of t flows into: its grad_fn's output, a leaf's accumulator (made on
/// first use), or none when t does not require grad.
Edge gradient_edge(const Tensor& t);

/// The recording hooks of dispatch(). `before` runs ahead of the kernel: it checks an in-place
/// write and keeps a copy of the inputs the write overwrites; `after` records the op.
struct Recording {
  bool active = false;
  std::vector<Tensor> originals; // per input: its value before an in-place write, when it is
                                 // written and saved
};
Recording record_before(Op op, std::span<const Tensor> inputs, std::span<Tensor> out);
void record_after(Op op, std::span<const Tensor> inputs, const Attrs& attrs,
                  std::span<const Tensor> results, std::span<Tensor> out, Recording& rec);
/// Records `moved`, t's data moved to another device (Tensor::to), as made from t: its
/// gradient goes back to t's device.
void record_move(const Tensor& t, const Tensor& moved);
/// Marks the results of an op run under InferenceMode.
void mark_inference(std::span<const Tensor> results);
/// Whether InferenceMode is active on this thread (InferenceMode::is_enabled, for dispatch).
bool inference_mode();

/// The backward of `op` (runtime/autograd/formulas.cpp): the gradients of its inputs, given
/// the gradients of its outputs (undefined ones are zeros), the saved inputs and outputs (those
/// not saved are undefined) and which inputs need one.
std::vector<Tensor> op_backward(Op op, const Attrs& attrs, std::span<const Tensor> inputs,
                                std::span<const TensorMeta> input_meta,
                                std::span<const Tensor> outputs, std::span<const Tensor> grads,
                                const std::vector<bool>& needed);
/// Which of an op's inputs and outputs its backward reads.
struct SavePlan {
  bool inputs = false, outputs = false;
};
SavePlan save_plan(Op op);
/// Whether an op is differentiable at all (its floating results get a node).
bool differentiable(Op op);

/// A new node's sequence number (creation order): nodes numbered below it were made before.
uint64_t new_sequence();

/// g summed down to `sizes` (the reverse of broadcasting).
Tensor sum_to(const Tensor& g, IntList sizes);

} // namespace kiln::autograd
