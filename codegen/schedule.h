// Schedule: how a kernel's loops run, kept apart from what they compute (the Kernel). A
// heuristic picks it; max_autotune searches over the same fields (codegen/autotune.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ir/kernel/kernel.h"
#include "runtime/error.h"

namespace kiln::codegen {

struct Schedule {
  /// Which loop is vector code: none, the last outer variable (lanes are neighbouring
  /// outer points), or the last inner variable (lanes are neighbouring reduction points).
  enum class Vector : uint8_t { none, outer, inner };
  Vector vector = Vector::none;
  int lanes = 1;
  /// Vectors per step of the vector loop. Inner mode: a reduction keeps lanes x unroll
  /// accumulators, which hides the latency of its adds. Outer mode: a step covers
  /// lanes x unroll neighbouring outer points, so a reduction over a leading dim (a column
  /// sum) loads `unroll` neighbouring vectors per inner point into as many accumulators: the
  /// register tile of that loop order.
  int unroll = 1;
  /// Points of the last outer dim per row: rows split that dim into blocks so that even a
  /// one-dimensional kernel has rows to run in parallel.
  int64_t block = 1;
  /// Points of the second-to-last outer dim per row (1: one): a row then covers a tile of
  /// `tile` x `block` outer points, the second-to-last dim outside the last, so that loads
  /// strided along the last dim (a transpose) reuse the cache lines a tile brings in.
  int64_t tile = 1;
  /// Points of the second-to-last outer dim computed together within a tile (unroll and
  /// jam; 1: one): their items are emitted side by side and their inner loops run as one, each
  /// with its own accumulators, so a load that does not depend on that dim is made once for
  /// all. With outer vector code that is a jam x (lanes x unroll) register tile: a GEMM's
  /// micro-kernel, each B vector loaded once per k for `jam` rows of A.
  int jam = 1;
  /// Rows per parallel chunk; a kernel of at most `grain` rows runs on the calling thread.
  int64_t grain = 1;
  /// Threads the rows may run on; 0: the pool's count.
  int threads = 0;
  /// The kernel's data streams through memory: unit-stride vector stores to output buffers
  /// bypass the caches (non-temporal stores, a fence at the end), since an output far larger
  /// than the caches is not read back before it leaves them and a plain store first reads
  /// every line it writes; and a row's second inner loop prefetches what its first loads,
  /// one row on, so that the memory works while later loops compute from L1.
  bool stream = false;

  /// Rows of a kernel: the outer points but the last dim, times the blocks of the last.
  int64_t rows(const ir::kernel::Kernel& k) const;
  std::string str() const;
};

/// Parses Schedule::str()'s form, "vector=inner lanes=8 unroll=4 block=1 grain=16" (space-
/// separated KEY=VALUE in any order; a field not given keeps Schedule's default): vector none,
/// outer or inner; lanes 1, 2, 4, 8 or 16; unroll 1..16; block, tile and grain >= 1;
/// threads >= 0; jam 1..16; stream 0 or 1. str() names tile and jam only when they are not
/// 1, stream only when set.
/// The error names the text and the bad field.
Expected<Schedule> parse_schedule(std::string_view text);

/// Whether code generation can run kernel k under s: outer vector code needs an outer
/// variable, inner vector code an inner one and no argmax/argmin (their index accumulators
/// are per outer lane), a tile two outer variables, a jam a tile at least as large. The error
/// says why not.
Expected<void> check_schedule(const Schedule& s, const ir::kernel::Kernel& k);

/// Fields fixed from outside instead of by the heuristic: by tests that run every vector
/// width and thread count the host can execute, by `kiln` commands, later by the autotuner.
/// Text form (KILN_SCHEDULE, CompileOptions::schedule): "lanes=8,threads=1,grain=1".
struct ScheduleOverride {
  /// f32 lanes of the widest vector (1, 2, 4, 8 or 16): the vector width as if the target's
  /// registers held lanes x 4 bytes (f64 kernels use half as many). Any width runs on any
  /// x86-64 host (LLVM splits vectors wider than the registers), so every host can compute
  /// in the order of every other. 0: the target's.
  int lanes = 0;
  /// Threads a kernel's rows may run on. 0: the pool's.
  int threads = 0;
  /// Rows per parallel chunk (1 runs even a small kernel in chunks). 0: the heuristic's.
  int64_t grain = 0;

  bool empty() const { return lanes == 0 && threads == 0 && grain == 0; }
  /// The text form ("" when empty).
  std::string str() const;
};

/// Parses the text form; "" is no override. A kiln::Error names a bad key or value.
ScheduleOverride parse_schedule_override(std::string_view text);
/// KILN_SCHEDULE's text ("" when unset).
std::string schedule_override_env();

/// Output bytes from which a kernel streams its stores (Schedule::stream), and its lowering
/// computes a value again rather than stash it in such an output to load back: the output
/// would not stay in the caches until the consumer reads it.
inline constexpr int64_t kStreamBytes = int64_t{16} << 20;

/// Whether k loads along its last outer variable with a stride and along the one before it with
/// unit stride (a transpose): the heuristic tiles such kernels, and max_autotune tries tiles.
bool transposed_loads(const ir::kernel::Kernel& k);

/// Whether k's inner loops load along the last inner variable, and every such load is
/// unit-stride along it: the loads a vector (CPU) or a group of threads (GPU) walking that
/// variable reads contiguously.
bool unit_stride_inner_loads(const ir::kernel::Kernel& k);

/// Whether an inner loop of k loads both along o_{n-2} and, without it, unit-stride along
/// o_{n-1}: a contraction (a GEMM in reduction form: A's rows and B's row), which a jam of
/// o_{n-2} turns into a register tile.
bool shared_row_loads(const ir::kernel::Kernel& k);

/// The heuristic: vector width from the widest value type and the target's registers, inner
/// vectorisation for reductions over a unit-stride last dim, blocks of 4096 points; 4 (or 2)
/// vectors per step for reductions over a leading dim; a 4 x 2-vector register tile in 32 x
/// 64-point tiles for contractions (shared_row_loads); 64 x 64 tiles for pointwise kernels
/// that read a transpose (transposed_loads); chunks of at least kParallelGrain element
/// operations; streamed stores when the outputs hold at least kStreamBytes; then the
/// override's fields.
Schedule choose_schedule(const ir::kernel::Kernel& k, int vector_bytes,
                         const ScheduleOverride& fixed = {});

} // namespace kiln::codegen
