// Epilogues of library contractions: the pointwise ops that follow a matmul or conv2d in a
// compiled graph (bias, activation, residual add, scaling) and run inside the library call,
// as oneDNN post-ops, so they cost no extra pass over memory. The fusion pass
// (passes/fusion) finds them; the Plan runs them through run_with_epilogue.
//
// Every epilogue also has an exact eager meaning: the same ops, one by one, through dispatch.
// That is what runs when oneDNN is off, refuses the shapes or the dtype, or would fall back
// to a reference implementation; it gives the unfused graph's result bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/ops/op.h"
#include "runtime/tensor.h"

namespace kiln {

struct PostOp {
  enum class Kind : uint8_t {
    relu,      // relu(y)
    gelu_erf,  // gelu(y, "none") as kiln::gelu traces it
    gelu_tanh, // gelu(y, "tanh")
    silu,      // y * sigmoid(y)
    sigmoid,   // sigmoid(y)
    tanh,      // tanh(y)
    binary,    // op(y, t) or op(t, y) with op in add, sub, mul, div
  };
  Kind kind = Kind::relu;
  Op op = Op::add; // binary: the op
  /// binary: the other operand's index among the step's operands.
  size_t operand = 0;
  /// binary: the other operand is the op's first input (only add and mul, or a scalar).
  bool operand_first = false;
  /// binary: the other operand is a one-element constant with this value (a wrapped
  /// number), which oneDNN takes as an eltwise_linear scale or shift.
  bool is_scalar = false;
  double scalar = 0;

  std::string str() const;
};

struct Epilogue {
  /// The contraction's own operands, first among the step's operands: matmul 2, conv2d 2 or
  /// 3 (bias).
  size_t contraction_operands = 2;
  std::vector<PostOp> ops;
  /// The result (the last op's output): its sizes and layout (dense strides; empty for
  /// contiguous, channels-last for a conv in a channels-last region).
  Shape sizes;
  Shape strides;
  DType dtype = DType::f32;
  /// The weights (operand 1) are parameters of the compiled model: oneDNN may keep them
  /// reordered into its preferred layout, keyed by storage and version counter, so they are
  /// reordered once and again only after an in-place update.
  bool weights_are_parameters = false;

  /// "gelu_erf, add %3" ("no post-ops" for none), then ", result strides [...]" when the
  /// result is not contiguous: for logs and dumps.
  std::string str() const;
};

/// Whether library epilogues exist in this build (oneDNN); the fusion pass forms them only
/// then.
bool library_epilogues_available();

/// Whether oneDNN, left to choose the layouts of an f32 conv2d of these sizes (source x,
/// weight w, result y; `attrs` conv2d's), runs it on NHWC source and result. The layout pass
/// stores only such convs' activations channels-last, so that compiled code runs the very
/// kernel eager code runs: oneDNN's kernels differ where it matters (with a non-finite
/// weight, some skip the taps that read padding and some compute 0 * NaN there).
bool library_conv_runs_nhwc(IntList x, IntList w, IntList y, bool bias, const Attrs& attrs);

/// Runs `op` (matmul or conv2d, with `attrs`) on the first ep.contraction_operands operands,
/// then ep's ops, and returns the result: through one oneDNN primitive with post-ops when it
/// can, else through dispatch op by op. The result has ep's sizes, dtype and layout; with
/// `out` (such a tensor: a planned buffer), it is written there and `*out` returned.
Tensor run_with_epilogue(Op op, const Attrs& attrs, std::span<const Tensor> operands,
                         const Epilogue& ep, const Tensor* out = nullptr);

/// A library call set up once and run again on other addresses of the same geometry (the
/// static plans of Mode::reduce_overhead): the primitive, its argument block, scratchpad and
/// packed weights are kept; a run points the arguments at the new addresses and executes.
class PreparedLibraryCall {
public:
  virtual ~PreparedLibraryCall() = default;
  /// The data of the step's operands, then of its result, in the order run_and_prepare took.
  virtual void run(std::span<char* const> addresses) = 0;
  /// Bytes the call needs only while it runs (reordered copies of operands, scratchpad).
  virtual size_t scratch_bytes() const { return 0; }
  /// Moves that memory into `base` (64-byte aligned, scratch_bytes() long), which calls that
  /// never run at the same time may share: a static plan gives all its calls one block.
  virtual void bind_scratch(char* base) { (void)base; }
};

/// True on a thread while it is inside a library's execution (oneDNN's primitive execute,
/// whose own bookkeeping allocates on every call): tests that count a replay's allocations
/// tell the library's from kiln's with it.
bool in_library_call();

/// Runs op with its epilogue into `out` (as run_with_epilogue does) and returns the library
/// call it made, prepared to run again. Null when the ops ran one by one, or the call read a
/// copy of an operand (a strided post-op operand), or two operands share an address: a rerun
/// of such a step goes through run_with_epilogue.
std::unique_ptr<PreparedLibraryCall> run_and_prepare(Op op, const Attrs& attrs,
                                                     std::span<const Tensor> operands,
                                                     const Epilogue& ep, const Tensor& out);

} // namespace kiln
