// Checking one function over tensors compiled against eager: outputs by the f64 reference rule
// (runtime/accuracy.h), inputs unmutated unless eager mutates them, and the same bits again on
// a second (replayed) call. Shared by `kiln fuzz` and `kiln run FILE.kir`.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frontend/compile.h"
#include "runtime/tensor.h"

namespace kiln::tools {

/// The function under test: runs on the given tensors (concrete, or traced by kiln::compile)
/// and returns its outputs; it may write into its inputs.
using TestFunction = std::function<std::vector<Tensor>(std::span<const Tensor>)>;
/// Makes a fresh copy of the function's inputs, the same data every call.
using InputMaker = std::function<std::vector<Tensor>()>;

struct CheckOptions {
  Mode mode = Mode::default_;
  /// Bound the error of each output by the larger of the function run on |inputs| in f64
  /// (Σ|terms| for sum-like functions, where inputs may cancel) and |reference|, times
  /// magnitude_scale: for functions with reductions.
  bool magnitude = false;
  /// The magnitude times this: sqrt of the longest reduction. The rounding error of a sum of
  /// n terms added in sequence (one vector lane's share, one thread's chunk) grows like
  /// sqrt(n) eps Σ|terms| typically (a random walk), n eps Σ|terms| at worst (TESTING.md).
  double magnitude_scale = 1;
  /// The function to run on f64 inputs for the reference (fn when empty): fn computing in f64
  /// throughout (run_program's and run_graph's reference mode).
  TestFunction reference_fn;
  /// The function to run on |inputs| for the magnitude (fn when empty): fn with its sums over
  /// |terms| (their magnitude mode).
  TestFunction magnitude_fn;
  /// Call the compiled function a second time and require the same bits.
  bool replay = true;
};

/// What a check found.
struct CheckReport {
  /// Eager threw: the inputs are no valid call, nothing was checked.
  std::optional<std::string> invalid;
  /// The compiled call threw where eager did not.
  std::optional<std::string> compiled_error;
  /// Every difference found, each on one line ("output 0: ...").
  std::vector<std::string> mismatches;
  std::vector<Tensor> eager, compiled;
  /// Every compiled output equals eager's bit for bit.
  bool bitwise = false;
  CompileStats stats;
  double first_call_ms = 0, second_call_ms = 0;
  bool passed() const { return !invalid && !compiled_error && mismatches.empty(); }
};

/// The magnitude scale for sums of at most `n` terms: max(1, sqrt(n)).
double magnitude_scale_for(double n);

/// Runs `fn` eagerly, on f64 copies of the inputs (the reference), optionally on their
/// magnitudes, then compiled in `options.mode`, and compares.
CheckReport check_compiled(const TestFunction& fn, const InputMaker& make,
                           const CheckOptions& options);

} // namespace kiln::tools
