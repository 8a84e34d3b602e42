// The autotuner of Mode::max_autotune: for each generated kernel, schedule candidates around
// the heuristic's (vector width and mode, unroll and so accumulators, threads, grain, blocks,
// tiles for transposed loads),
// compiled together in one target compile (which the CPU target spreads over its threads),
// then timed one after another on buffers of the kernel's captured sizes: a warm-up, then the
// median of several samples taken in rounds over the candidates. The fastest wins only when
// it beats the heuristic's schedule by more than the noise guard (3%), so a tie keeps what the
// heuristic chose. Winners go to the autotune database, entries of the on-disk cache keyed by
// the kernel's text (its shapes included), the target's identity (CPU model and features),
// the heuristic's choice and kiln's version and build: a later compile of the same kernel, in
// this process or another, times nothing. A time budget bounds each graph's tuning; kernels
// left when it runs out keep the heuristic's schedules.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "codegen/schedule.h"
#include "ir/kernel/kernel.h"

namespace kiln::codegen {

class Target;
class DiskCache;

/// A candidate must be this much faster than the default choice to replace it; closer is
/// noise, and the default stays (so ties give the heuristic's answer).
inline constexpr double kNoiseGuard = 0.03;

/// The median time in ms of each form: a warm-up run of each, then 5 samples taken in
/// rounds over the forms, each sample repeating its form to last about 0.2 ms.
std::vector<double> median_times(std::span<const std::function<void()>> forms);

struct AutotuneOptions {
  /// Time one graph's tuning may take (compiles and timings); past it, the kernels not yet
  /// tuned keep the heuristic's schedules. Database hits cost next to nothing.
  double budget_ms = 60000;
  /// KILN_LOGS=autotune: every candidate with its time, and the winner.
  bool log = false;
  /// A progress line on stderr ("autotuning kernel 12/40 ..."), for a terminal.
  bool progress = false;
  /// Where the database lives; null: the kernel cache (DiskCache::global()).
  const DiskCache* database = nullptr;
};

struct AutotuneResult {
  std::vector<Schedule> schedules; // per kernel
  int64_t timings = 0;             // candidates timed
  int64_t database_hits = 0;       // kernels whose schedule the database gave
  int64_t tuned = 0;               // kernels tuned now
  int64_t changed = 0;             // of all kernels, those whose schedule is not the heuristic's
  int64_t left = 0;                // kernels left to the heuristic: budget spent, or not timeable
  double ms = 0;
  std::string str() const;
};

/// The candidates for kernel k around the heuristic's schedule h: h first, then each variant
/// code generation accepts for k (check_schedule), without repeats.
std::vector<Schedule> schedule_candidates(const ir::kernel::Kernel& k, const Schedule& h);

/// The database key of kernel k (its name aside) with heuristic schedule h on `target`.
std::string autotune_key(const Target& target, const ir::kernel::Kernel& k, const Schedule& h);

/// Whether k can run on buffers of zeros, which is what it is timed on: a kernel that divides
/// integers (division by zero traps) keeps the heuristic's schedule.
bool timeable(const ir::kernel::Kernel& k);

/// The schedule of each kernel: from the database, else tuned on `target`, else (budget
/// spent, not timeable, the target cannot compile the candidates) the heuristic's.
AutotuneResult autotune(const Target& target, std::span<const ir::kernel::Kernel> kernels,
                        std::span<const Schedule> heuristic, const AutotuneOptions& options);

} // namespace kiln::codegen
