// A random test program of `kiln fuzz`: inputs, steps (each an application of one rule of the
// generator's table), outputs; its text form; its inputs drawn from a seed; and running it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace kiln::tools {

/// A value of a program: input `index` or the result of step `index`.
struct ValueRef {
  bool input = true;
  int index = 0;
  friend bool operator==(const ValueRef&, const ValueRef&) = default;
};

/// How an input's elements lie in memory: row-major, dims in reverse order (a transposed
/// matrix), or row-major with every other element skipped.
enum class Layout : uint8_t { contiguous, reversed, stepped };

/// One program input: a tensor of these sizes, dtype and layout, its data drawn from the
/// program's seed and the input's position (make_input).
struct ProgramInput {
  Shape sizes;
  DType dtype = DType::f32;
  Layout layout = Layout::contiguous;
};

/// The strides of `layout` for these sizes (empty for contiguous).
Shape layout_strides(IntList sizes, Layout layout);

/// One step: rule `rule` (a name of the generator's table) applied to operands with integer
/// and floating parameters. The result's sizes and dtype are recorded when generated, so that
/// a shrinker can replace the step by an input of the same type.
struct Step {
  std::string rule;
  std::vector<ValueRef> operands;
  std::vector<int64_t> ints;
  double number = 0;
  Shape sizes;
  DType dtype = DType::f32;
};

struct Program {
  /// The seed of the input data (make_input).
  uint64_t input_seed = 0;
  /// Whether floating inputs hold NaN, ±Inf and ±0.0 among their values.
  bool specials = false;
  std::vector<ProgramInput> inputs;
  std::vector<Step> steps;
  std::vector<ValueRef> outputs;
};

/// The program as text: one line per input, step and output list (`parse_program` reads it).
std::string program_text(const Program& p);
/// Reads program_text's output; a kiln::Error names the bad line.
Program parse_program(std::string_view text);

/// Input `index` of a run seeded with `seed`: a tensor of these sizes, strides (empty =
/// contiguous) and dtype. Floating values are small multiples of 1/8 in [-4, 4] (exact in
/// every float dtype) or, one in four, uniform in [-3, 3]; with `specials`, about one element
/// in eight is NaN, +Inf, -Inf, -0.0 or 0.0. Integers lie in [-8, 8], bools are fair coins.
/// The same for `kiln fuzz` and `kiln run FILE.kir`.
Tensor make_input(IntList sizes, IntList strides, DType dtype, uint64_t seed, size_t index,
                  bool specials);
/// The program's inputs.
std::vector<Tensor> make_inputs(const Program& p);

/// How run_program and run_graph run: as written (eagerly, or traced by kiln::compile); as
/// the f64 reference (every floating operand widened to f64, so that a value computed from
/// integers meets the widened inputs in f64 too); or as the magnitude run (the reference, with
/// the steps that sum reading |operands|: on |inputs|, each output is then the sum of the
/// magnitudes of the terms it was computed from, what a reordering error scales with).
enum class RunMode : uint8_t { as_written, reference, magnitude };

/// Runs the program on `inputs` and returns its outputs. Steps that write in place write into
/// the tensors they are given. A kiln::Error from an op propagates.
std::vector<Tensor> run_program(const Program& p, std::span<const Tensor> inputs,
                                RunMode mode = RunMode::as_written);
/// An operand as `mode` reads it for a step (`sums`: the step reorders a sum).
Tensor run_operand(const Tensor& t, RunMode mode, bool sums);

/// Whether the program has a step whose rounding depends on summation order (reductions,
/// matmul, convolution, normalisations): then a magnitude run bounds the honest error.
bool has_reordered_sums(const Program& p);
/// The most terms any such step sums per result element (elements read per element written,
/// or the last dim of its first operand, whichever is larger).
double longest_sum(const Program& p);

} // namespace kiln::tools
