// Attention as one step of a compiled plan (codegen/attention finds it): the scores
// S = Q Kᵀ with their epilogue (the scale), the graph's own softmax kernel over S's rows (mask,
// max, exp, sum, divide: one generated kernel), and O = P V, run per batch item and block of
// query rows. A block's scores and probabilities live in a buffer of the thread that runs it
// and stay in its caches: the [L, S] matrices are never written to memory whole. Where the
// mask is known when the graph compiles (a causal mask), a block computes only the keys the
// mask leaves to some row of it: masked blocks of keys are skipped in both products.
//
// The products are oneDNN calls prepared once per thread and geometry (PreparedLibraryCall)
// and rerun on each block's addresses; the softmax is the very kernel the unfused plan runs,
// called on the block's rows. So the step computes what the unfused steps compute, block by
// block: the same kernel on the same scores (up to the products' own rounding, which a
// narrower product may sum in another order).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/epilogue.h"
#include "runtime/plan.h"
#include "runtime/tensor.h"

namespace kiln {

class AttentionCall {
public:
  /// Where a softmax kernel buffer points: the block's scores, its probabilities, or (>= 0)
  /// an operand of the step.
  static constexpr int64_t kScores = -1, kProbs = -2;

  /// The scores' product: the step operands its library call takes (Q [..., L, D] and
  /// Kᵀ [..., D, S] first, then its post-ops' one-element operands) and its epilogue (the
  /// full scores: contiguous [..., L, S]).
  std::vector<size_t> scores_operands;
  Epilogue scores;
  /// The output's product: its operands (the first, the probabilities, is not a step operand
  /// and is ignored; V [..., S, E] second; then one-element post-op operands) and epilogue
  /// (the step's result).
  std::vector<size_t> out_operands;
  Epilogue out;
  /// The softmax kernel (an index into the plan's kernels) and, per buffer of it, kScores,
  /// kProbs or a step operand.
  int kernel = -1;
  std::vector<int64_t> kernel_buffers;
  /// Query rows per block (a multiple of kernel_rows_per and of each used narrowed kernel's).
  int64_t block = 64;
  /// Query rows per row of the softmax kernel (its schedule's block of the last outer dim):
  /// a block's rows [l0, l0 + rows) of batch item n are kernel rows
  /// n * ceil(L / per) + [l0 / per, ceil((l0 + rows) / per)).
  int64_t kernel_rows_per = 1;
  /// Per block of query rows: the mask leaves them keys [0, key_end[b]) at most (empty: all
  /// keys). A block whose skipped rows of V hold a non-finite value takes all keys, as the
  /// unfused product would propagate it (0 * inf).
  std::vector<int64_t> key_end;
  /// The softmax kernel narrowed to the first w keys (its loops over [0, w), the same
  /// indices), by w: a block with key_end w runs it, so the masked columns cost nothing.
  /// A width without one runs the full kernel.
  struct Narrowed {
    int64_t width = 0;
    KernelEntry entry = nullptr;
    std::string name;     // the kernel's symbol
    int64_t rows_per = 1; // query rows per kernel row (used only when it divides block)
  };
  std::vector<Narrowed> narrow;

  AttentionCall();
  ~AttentionCall();
  AttentionCall(AttentionCall&&) noexcept;
  AttentionCall& operator=(AttentionCall&&) noexcept;

  /// The fraction of key columns the blocks skip (0 without a mask).
  double skipped_fraction() const;
  /// "attention: scores + mul(y, 0.125), softmax kernel 3, out + no post-ops; blocks of 128
  /// query rows, 25% of the keys skipped".
  std::string str() const;

  /// Runs the step on its operands into `result` (of out.sizes and layout).
  void run(const Plan::KernelCall& softmax, std::span<const Tensor> operands,
           const Tensor& result) const;

private:
  struct Workspaces;
  std::unique_ptr<Workspaces> workspaces_; // per-thread buffers and prepared calls
};

} // namespace kiln
