// Attention sites of a fused graph: the scores' product, the softmax kernel over their rows
// and the output's product, which the plan runs as one step block by block
// (runtime/attention.h) when that is faster than the three steps alone.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "codegen/lower_group.h"
#include "codegen/schedule.h"
#include "passes/fusion.h"
#include "runtime/attention.h"

namespace kiln::codegen {

/// One site: fusion.order[scores] computes X = Q Kᵀ (a matmul, a library call with one-element
/// post-ops or an eager call), fusion.order[softmax] is a reduction group over X's last dim
/// that reads X directly, is X's only reader and stores one result P of X's shape, and
/// fusion.order[out] is the only reader of P, matmul(P, V). Q, Kᵀ, V and the result share
/// their batch dims; everything is f32, X and P contiguous.
struct AttentionSite {
  size_t scores = 0, softmax = 0, out = 0; // indices into fusion.order
  const ir::Value* x = nullptr;            // the scores
  const ir::Value* p = nullptr;            // the probabilities
  /// Query rows per block (attention_block; KILN_ATTENTION_BLOCK=N sets it, for tests and
  /// tuning). A multiple of rows_per once the schedules are known.
  int64_t block = 64;
  /// Query rows per row of the softmax kernel (its schedule's block; 1 until scheduled).
  int64_t rows_per = 1;
  /// Per block of query rows, the keys [0, key_end) some row of it keeps (the group reads X
  /// only through where(mask, -inf, X) selects whose mask is known when compiling: a causal
  /// mask); empty: every key.
  std::vector<int64_t> key_end;
  /// The softmax kernel narrowed to the first w keys, as (w, its index among the lowered
  /// kernels), for each key_end short of every key that a candidate block size gives
  /// (narrow_widths; the lowering adds them).
  std::vector<std::pair<int64_t, size_t>> narrow;
};

/// The block sizes a compile times (half, once and twice site.block, 16 to 256, none past
/// the first that holds every query row; KILN_ATTENTION_BLOCK: that one alone), each rounded
/// up to a multiple of site.rows_per.
std::vector<int64_t> attention_blocks(const AttentionSite& site);

/// The distinct key_end short of every key over attention_blocks(site): the widths the softmax
/// kernel is narrowed to.
std::vector<int64_t> narrow_widths(const AttentionSite& site);

/// The name of kernel `name` narrowed to `width` keys.
std::string narrow_name(const std::string& name, int64_t width);

/// `k` (a softmax kernel over the scores' last dim) iterating only the first `width` keys:
/// the same indices, so it reads and writes those columns of the same rows.
ir::kernel::Kernel narrow_kernel(const ir::kernel::Kernel& k, int64_t width);

/// The runtime call of a site (its kernel index unset), the values its operand indices name,
/// its result and the output product's matmul node.
struct AttentionBuild {
  std::unique_ptr<AttentionCall> call;
  std::vector<const ir::Value*> operands;
  const ir::Value* result = nullptr;
  const ir::Node* anchor = nullptr;
};
AttentionBuild make_attention_call(const AttentionSite& site, const passes::FusionResult& fusion,
                                   const LoweredGroup& lg, std::span<const Schedule> schedules,
                                   std::span<const KernelEntry> entries);

/// Which sites run as one attention step. Each is timed both ways on its own shapes (zeros in
/// buffers of the operands' types): the step, against the three steps alone, and the faster
/// wins; a decision is kept for the process per geometry. KILN_ATTENTION=tiled or unfused
/// takes every site one way without timing. `log` gets one line per site: which won, by how
/// much.
std::vector<AttentionSite>
choose_attention(std::span<const AttentionSite> sites, const passes::FusionResult& fusion,
                 std::span<const LoweredGroup> groups, std::span<const Schedule> schedules,
                 std::span<const KernelEntry> entries, std::vector<std::string>& log);

/// Query rows per block: scores and probabilities of a block (2 * block * keys floats) fit
/// in 1 MiB (a core's L2), 16 to 128 rows.
int64_t attention_block(int64_t keys);

/// The sites of a fused graph (empty without library epilogues: the products are oneDNN's).
/// Their softmax groups are lowered and scheduled for data that stays in the caches (never
/// streamed), as the one step runs them block by block.
std::vector<AttentionSite> find_attention(const passes::FusionResult& fusion);

} // namespace kiln::codegen
