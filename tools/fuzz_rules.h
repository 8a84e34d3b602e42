// The generator of `kiln fuzz`: a table of rules (one per op or op pattern: how to choose its
// operands and parameters, and how to apply it), and random valid programs built from it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tools/fuzz_program.h"

namespace kiln::tools {

class ProgramBuilder;

/// What a rule's result is, for the checks that follow it.
struct RuleTraits {
  /// Compiled code computes it bit for bit as eager code does, given exact operands
  /// (pointwise arithmetic, views, copies, comparisons). Otherwise (vector math, reordered
  /// sums) it may differ by rounding, within the f64 reference rule.
  bool exact = true;
  /// Applied only to exact values: discontinuous in its operands (comparisons, floor, casts to
  /// integers, argmax), where a rounding difference before it is an honest difference after;
  /// or multiplying the relative error of its operand by the operand's size (exp, pow, sin),
  /// beyond the few eps of the output that the rule's floor allows.
  bool needs_exact = false;
  /// Reorders a sum (reductions, matmul, convolution, normalisations).
  bool sums = false;
  /// Writes into operand 0 (its result is operand 0).
  bool in_place = false;
};

/// One generator rule: a row of the table.
struct Rule {
  std::string_view name;
  /// The family `--ops` selects by: pointwise, reduction, view, inplace, matmul, conv, norm,
  /// data.
  std::string_view group;
  RuleTraits traits;
  /// Chooses operands and parameters into the step (adding program inputs as needed); false
  /// when the program has no value the rule can use.
  bool (*make)(ProgramBuilder& b, Step& s);
  /// Applies the step to its operands.
  Tensor (*apply)(std::span<const Tensor> x, const Step& s);
};

/// The table.
std::span<const Rule> fuzz_rules();
/// The rule named `name`, or null.
const Rule* find_rule(std::string_view name);

/// Builds a program step by step; the rules' `make` functions call it.
class ProgramBuilder {
public:
  ProgramBuilder(uint64_t seed, Program& program);

  int64_t uniform(int64_t lo, int64_t hi); // inclusive
  bool coin(double p);
  template <typename T> T one_of(std::initializer_list<T> choices) {
    return *(choices.begin() + uniform(0, static_cast<int64_t>(choices.size()) - 1));
  }

  /// A value whose tensor satisfies `ok` (and is exact when the current rule needs it),
  /// the most recent one more often than not.
  std::optional<ValueRef> pick(const std::function<bool(const Tensor&)>& ok);
  /// An input of the program, when one satisfies `ok`; with `pristine`, only inputs no step
  /// has written in place (their data as make_input drew it).
  std::optional<ValueRef> pick_input(const std::function<bool(const Tensor&)>& ok,
                                     bool pristine = false);
  Tensor tensor(ValueRef r) const;
  /// Adds a program input (its data drawn as make_input draws it).
  ValueRef new_input(Shape sizes, DType dtype, Layout layout = Layout::contiguous);
  /// Sizes of rank in [min_rank, max_rank], at most a few thousand elements.
  Shape random_shape(int min_rank, int max_rank);
  DType random_dtype(bool floating_only);
  /// A value broadcastable with `a` (to exactly a's sizes when `into_a`): an existing one
  /// or a new input.
  ValueRef partner(const Tensor& a, bool into_a);

  /// Runs the generation: `steps` steps of the allowed rules.
  void generate(int steps, const std::vector<const Rule*>& rules);

private:
  struct Slot {
    ValueRef ref;
    Tensor tensor;
    bool exact = true;
    bool written = false; // a step wrote into its storage
  };
  /// Draws one step of `rule`; false (the program unchanged) when it does not fit.
  bool try_step(const Rule& rule);
  /// The step's result run eagerly, or nothing when the op refuses it or when its result could
  /// differ honestly from the reference in a way the rule would call a mismatch.
  std::optional<Slot> apply(const Rule& rule, const Step& s);
  void mark_written(const Tensor& written, bool exact);
  bool loses_precision(const Tensor& out, std::span<const ValueRef> operands) const;
  void choose_outputs();

  std::mt19937_64 rng_;
  Program& p_;
  std::vector<Slot> slots_;
  bool need_exact_ = false;
};

/// Which rules to draw from: names or groups (`--ops`); empty = all.
std::vector<const Rule*> select_rules(const std::vector<std::string>& names);

/// Program `index` of a run seeded with `seed`, built from `rules`: deterministic.
Program generate_program(uint64_t seed, uint64_t index, const std::vector<const Rule*>& rules);

} // namespace kiln::tools
