// The differential-test harness: runs a function of tensors eagerly and through kiln::compile
// (default options, backend "kiln"), twice (traced call, then replay), and compares dtype,
// shape and values by the f64 reference rule (runtime/accuracy.h: the case is also run
// eagerly on f64 copies of its inputs), NaN and infinity positions exact and the sign of
// zero checked. Also: inputs left unmutated, the random stream advanced
// as eagerly, the table of expected failures (expected_failures.h), and input builders with
// deterministic values (NaN, ±Inf, -0.0, large magnitudes) in every layout the cases need.
//
// Environment: KILN_SCHEDULE (codegen/schedule.h) compiles every case under a schedule
// override (vector lanes, threads); KILN_DIFF_BACKEND=interpreter|eager compiles with that backend
// instead of "kiln" (to tell a code-generation bug from a frontend or pass bug; the
// expected-failure table, which lists the default backend's failures, then does not apply);
// KILN_DIFF_MODE=reduce_overhead|max_autotune compiles in that mode and calls a third time (the
// static plan the first replay built);
// KILN_DIFF_VERBOSE prints each case as it starts (a crash then names its case) and every refused
// or expected-failing case; KILN_DIFF_STATS prints the counters at exit; KILN_DIFF_SKIP lists
// ('|'-separated) substrings of case names not to run, to get past a crashing case.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "diff/expected_failures.h"

namespace kiln::diff {

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
/// The function under test: the same callable runs eagerly and compiled.
using Fn = std::function<Outputs(const Inputs&)>;
/// One output of a bundle (see bundle()).
using ItemFn = std::function<Tensor(const Inputs&)>;

// ---- comparison ----

/// How a case's outputs are judged (docs/correctness.md, "The f64 reference rule";
/// runtime/accuracy.h).
struct CompareOptions {
  /// Why no f64 run is meaningful for this case, when none is (random ops draw other numbers
  /// when the dtype changes): then every output matches eager bit for bit. Empty: the f64
  /// reference rule.
  std::string exact_because;
  /// Why an f64 run is no reference for this case while the values are still not bit-exact
  /// (a dropout mask the f64 run would draw differently, inside math that rounds): then eager
  /// is the reference and the rule's floor alone bounds the difference.
  std::string no_f64_because;
  /// Sum-like outputs over inputs that cancel (±1e10 among small values): the rule's floor
  /// scales with the function run in f64 on |inputs| (Σ|terms|), not with the result.
  bool magnitude_of_abs_inputs = false;
  /// Two zeros of different signs differ (neg(0.0) = -0.0 must stay -0.0).
  bool zero_sign = true;
};

// ---- cases ----

struct Case {
  /// What is tested ("add", "unary ops", "softmax"); the failure message starts with it.
  std::string op;
  /// The dtype, shape and layout case ("f32 7x33 transposed").
  std::string variant;
  Fn fn;
  Inputs inputs;
  /// For in-place cases: builds fresh inputs for each run (eager and both compiled calls);
  /// their final values are compared like outputs.
  std::function<Inputs()> make_inputs;
  /// Labels for the outputs in failure messages (a bundle names each op).
  std::vector<std::string> output_names;
  CompareOptions compare;
  /// An eager kiln::Error skips the case silently (the op refuses these dtypes). Leave false
  /// where the op must accept the inputs (f32), so that a broken case cannot hide.
  bool may_refuse = false;
  /// manual_seed(*seed) before every run, and the generator's offset afterwards must match.
  std::optional<uint64_t> seed;
  /// The second compiled call must be a replay (no graph break, no re-trace).
  bool expect_replay = true;
  /// For the harness's self-test: the eager side runs this instead of fn.
  Fn reference;

  std::string name() const { return op + " [" + variant + "]"; }
};

enum class Outcome { passed, failed, refused, expected_failure, unexpected_pass };

struct Result {
  Outcome outcome = Outcome::passed;
  /// The first failure (or, for expected failures, what failed; for refusals, the error).
  std::string message;
};

/// Runs one case: eager, compile, call twice, compare; then applies the expected-failure
/// table (an expected failure that fails is Outcome::expected_failure, one that passes is
/// Outcome::unexpected_pass).
Result run_case(const Case& c, std::span<const ExpectedFailure> table = expected_failures());

/// run_case, reported to Catch2: a failure or an unexpected pass fails the test (and is
/// printed with the case's name); every other outcome counts as one passed assertion.
Outcome check(const Case& c);

/// A case whose outputs are several ops over the same inputs, each labelled: items the eager
/// op refuses (a kiln::Error on these inputs) are dropped first, unless `must_run` names them
/// (then the case fails). Returns nothing when every item was refused.
struct Item {
  std::string name;
  ItemFn fn;
  bool must_run = false;
};
std::optional<Case> bundle(std::string op, std::string variant, Inputs inputs,
                           std::vector<Item> items);
/// bundle() then check(); returns false when nothing was left to run.
bool check_bundle(std::string op, std::string variant, Inputs inputs, std::vector<Item> items);

/// Counters over the whole run (printed at exit when KILN_DIFF_STATS is set).
struct Counters {
  int64_t cases = 0;          // cases run through run_case
  int64_t refused = 0;        // cases the eager side refused
  int64_t compiled = 0;       // compiled functions built
  int64_t dropped_items = 0;  // bundle items the eager side refused
  int64_t expected_fails = 0; // failures listed in the table
  int64_t skipped = 0;        // cases KILN_DIFF_SKIP named
};
Counters& counters();

// ---- inputs ----

/// The value sets of make_input.
enum class Values {
  normal,   // N(0, 2^2) for floats, [-20, 20] for integers, random bools
  special,  // normal, with NaN, ±Inf, ±0, large and tiny magnitudes, halves every few elements
  positive, // (0.1, 6] for floats, [1, 20] for integers, true for bool
  nonzero,  // normal without zeros (divisors); integers in [-9, 9] \ {0}
  small,    // integers in [-4, 4] (exponents, indices); floats in [-2, 2]
  /// Multiples of 1/4 in [-8, 8] (integers in [-8, 8]): sums of these are exact in every
  /// float dtype's accumulator, so a reduction's result does not depend on its order.
  exact,
  /// exact, with a NaN, ±Inf or -0.0 every 41st element (still order-independent).
  exact_special,
  /// ±1/2, ±1, ±2 (integers ±1, ±2): products of a few hundred are exact.
  pow2,
};

/// How an input is laid out in memory.
enum class Layout {
  contiguous,
  transposed, // the last two dims of a contiguous tensor swapped (t())
  sliced,     // every second element of the last dim of a twice as wide tensor
  expanded,   // the size-1 dims of `shape` with stride 0 from a smaller tensor: see make_input
  permuted,   // a contiguous tensor of the reversed shape, permuted back (all dims reversed)
};

/// A deterministic tensor of `shape` and dtype `t` (values converted from f64 or i64 on the
/// host, so no kiln kernel is involved). `seed` picks the values. For Layout::expanded,
/// `shape` is the expanded shape and `base` the stored one (same rank, 1 where expanded).
Tensor make_input(Shape shape, DType t, Values v, uint64_t seed, Layout layout = Layout::contiguous,
                  Shape base = {});

/// The shape cases of the pointwise sweeps: every layout, with a label.
struct ShapeCase {
  std::string label; // "7x33 transposed"
  Shape shape;
  Layout layout = Layout::contiguous;
  Shape base = {}; // for Layout::expanded
};
/// 0-d, empty, one element, 7, 33, 1023, 2-D, 4-D, a size-1 dim, transposed, sliced with step
/// 2, expanded (stride 0) and permuted.
std::vector<ShapeCase> pointwise_shapes();
/// The subset of pointwise_shapes() the dtypes other than f32 run (to keep the run short):
/// 0-d, empty, 33, 1023, transposed, sliced and expanded.
std::vector<ShapeCase> pointwise_shapes_short();

/// The dtypes the sweeps cover: f32, f64, f16, bf16, i32, i64, bool.
std::vector<DType> sweep_dtypes();
/// Every dtype kiln has (the cast targets): also i8 and u8.
std::vector<DType> all_dtypes();

/// "f32", "bool", ...
std::string dtype_str(DType t);

} // namespace kiln::diff
