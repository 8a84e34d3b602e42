// Autograd, libtorch's way: operations on tensors that require gradients are recorded at the
// one dispatch point (runtime/ops/dispatch.cpp) as a graph of backward nodes, and
// Tensor::backward() / autograd::grad() run it in reverse.
//
// - A tensor requires grad when it is a leaf marked so (requires_grad_(), nn parameters) or
//   the result of a recorded op. Leaves accumulate their gradient into .grad(); other tensors
//   keep theirs only after retain_grad().
// - Each differentiable op's backward is written beside the op table
//   (runtime/autograd/formulas.cpp) in terms of other kiln ops, so that a backward pass is
//   itself recorded under create_graph (double backward) and traceable.
// - Saved tensors remember their version: one modified in place before backward is an error
//   naming the op ("one of the variables needed for gradient computation has been modified
//   by an inplace operation").
// - An in-place op on a leaf that requires grad is an error (outside NoGradGuard); one on a
//   non-leaf rebases its history onto the op.
// - NoGradGuard stops recording; InferenceMode does too, and marks the tensors made under it
//   as inference tensors, which can never join a graph.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/grad_mode.h"
#include "runtime/tensor.h"

namespace kiln::autograd {

/// The gradients of `outputs` (summed, each weighted by its grad_output: ones for a one-element
/// output when none is given) with respect to `inputs`, returned instead of accumulated into
/// .grad(). retain_graph keeps the graph for another backward (default: create_graph);
/// create_graph records the backward pass itself, for higher derivatives. An input the outputs
/// do not depend on is an error unless allow_unused (its gradient is then undefined).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                         bool allow_unused = false);

/// Runs backward from `tensors` (Tensor::backward for several roots), accumulating into the
/// .grad() of the leaves they depend on.
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

/// The name of the node that made t ("MulBackward"), or "" for a leaf.
std::string grad_fn_name(const Tensor& t);

/// Whether t was made under InferenceMode.
bool is_inference(const Tensor& t);

} // namespace kiln::autograd

namespace kiln {

/// No recording, as NoGradGuard, and the tensors made in its scope are inference tensors:
/// they can never require grad or be saved for backward (an error names the op).
class InferenceMode {
public:
  explicit InferenceMode(bool enabled = true);
  ~InferenceMode();
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;
  /// Whether an InferenceMode is active on this thread.
  static bool is_enabled();

private:
  bool saved_grad_, saved_inference_;
};

} // namespace kiln
