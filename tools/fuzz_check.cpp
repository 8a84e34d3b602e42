// check_compiled: one function, eager vs compiled, by the f64 reference rule.
#include "tools/fuzz_check.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/accuracy.h"
#include "runtime/error.h"
#include "runtime/ops.h"

namespace kiln::tools {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// Runs fn, or nothing when it throws kiln::Error (a reference run that is not meaningful).
std::vector<Tensor> try_run(const TestFunction& fn, std::vector<Tensor> inputs) {
  try {
    return fn(inputs);
  } catch (const Error&) {
    return {};
  }
}

/// |t| in f64 with NaN as 0 (NaN would disable the bound there), or undefined.
Tensor abs_or_zero(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return {};
  Tensor a = abs(t.to(DType::f64));
  return where(eq(a, a), a, Scalar(0.0));
}

/// The magnitude of a result of a program with sums: the larger of the magnitude run and the
/// reference at each element, times `scale` (sqrt of the longest sum). The magnitude run is
/// Σ|terms| for sum-like programs; for normalised ones (softmax, a variance) the reference
/// is the scale of the sum's relative error.
Tensor magnitude_bound(const Tensor& m, const Tensor& ref, double scale) {
  Tensor a = abs_or_zero(m), r = abs_or_zero(ref);
  if (!a.defined() && !r.defined()) return {};
  Tensor both = !a.defined() ? r : !r.defined() || a.sizes() != r.sizes() ? a : maximum(a, r);
  return mul(both, Scalar(scale));
}

CompileOptions options_for(Mode m) {
  CompileOptions c;
  c.mode = m;
  return c;
}

/// Copies of the tensors whose data later calls cannot change.
std::vector<Tensor> snapshot(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts)
    out.push_back(t.defined() ? t.clone() : t);
  return out;
}

class Checker {
public:
  Checker(const TestFunction& fn, const InputMaker& make, const CheckOptions& o)
      : fn_(fn), make_(make), o_(o) {}

  CheckReport run() {
    pristine_ = make_();
    eager_in_ = make_();
    try {
      r_.eager = snapshot(fn_(eager_in_));
    } catch (const Error& e) {
      r_.invalid = e.message();
      return std::move(r_);
    }
    ref_in_ = to_f64(make_());
    reference_ = try_run(o_.reference_fn ? o_.reference_fn : fn_, ref_in_);
    if (o_.magnitude)
      magnitude_ = try_run(o_.magnitude_fn ? o_.magnitude_fn : fn_, to_f64_abs(make_()));
    if (!compile_and_compare()) return std::move(r_);
    if (o_.replay) replay();
    return std::move(r_);
  }

private:
  std::vector<Tensor> call(std::vector<Tensor>& inputs) {
    std::vector<detail::CallArg> args;
    for (const Tensor& t : inputs)
      args.push_back({true, t, Scalar(0)});
    return compiled_.call(args, [&](std::span<const Tensor> ts) { return fn_(ts); });
  }

  bool compile_and_compare() {
    std::vector<Tensor> in = make_();
    auto start = Clock::now();
    try {
      first_ = call(in);
      r_.compiled = snapshot(first_);
    } catch (const Error& e) {
      r_.compiled_error = e.message();
      return false;
    }
    r_.first_call_ms = ms_since(start);
    r_.stats = compiled_.stats();
    compare_outputs();
    compare_inputs(in, "");
    return true;
  }

  void compare_outputs() {
    if (r_.compiled.size() != r_.eager.size()) {
      r_.mismatches.push_back("compiled gives " + std::to_string(r_.compiled.size()) +
                              " outputs, eager " + std::to_string(r_.eager.size()));
      return;
    }
    r_.bitwise = true;
    for (size_t k = 0; k < r_.eager.size(); ++k) {
      r_.bitwise = r_.bitwise && !check_bitwise(r_.compiled[k], r_.eager[k]);
      AccuracyOptions ao;
      Tensor ref = k < reference_.size() ? reference_[k] : Tensor();
      if (o_.magnitude)
        ao.magnitude = magnitude_bound(k < magnitude_.size() ? magnitude_[k] : Tensor(), ref,
                                       o_.magnitude_scale);
      if (auto why = check_accuracy(r_.compiled[k], r_.eager[k], ref, ao))
        r_.mismatches.push_back("output " + std::to_string(k) + ": " + *why);
    }
  }

  /// Inputs eager left alone must keep their bits; inputs eager wrote must be written alike.
  void compare_inputs(const std::vector<Tensor>& in, const std::string& when) {
    for (size_t k = 0; k < in.size(); ++k) {
      if (!check_bitwise(eager_in_[k], pristine_[k])) {
        if (auto why = check_bitwise(in[k], pristine_[k]))
          r_.mismatches.push_back("input " + std::to_string(k) + " was written by the compiled" +
                                  when + " call, not by eager: " + *why);
        continue;
      }
      Tensor ref = k < ref_in_.size() && !reference_.empty() ? ref_in_[k] : Tensor();
      if (auto why = check_accuracy(in[k], eager_in_[k], ref))
        r_.mismatches.push_back("input " + std::to_string(k) + " as written by the compiled" +
                                when + " call: " + *why);
    }
  }

  /// The replayed calls: one, and in the static modes a second that runs the static plan the
  /// first replay built. Each must give the first call's results bit for bit and leave them.
  void replay() {
    const int replays = o_.mode == Mode::default_ ? 1 : 2;
    for (int k = 0; k < replays; ++k) {
      const std::string which = k == 0 ? "second" : "third";
      std::vector<Tensor> in = make_();
      std::vector<Tensor> again;
      auto start = Clock::now();
      try {
        again = snapshot(call(in));
      } catch (const Error& e) {
        r_.compiled_error = which + " call: " + e.message();
        return;
      }
      if (k == 0) r_.second_call_ms = ms_since(start);
      r_.stats = compiled_.stats();
      for (size_t o = 0; o < again.size() && o < r_.compiled.size(); ++o)
        if (auto why = check_bitwise(again[o], r_.compiled[o]))
          r_.mismatches.push_back("output " + std::to_string(o) + " differs on the " + which +
                                  " (replayed) call: " + *why);
      compare_inputs(in, " " + which);
      // The first call's results belong to the caller: a later call must not write them.
      for (size_t o = 0; o < first_.size() && o < r_.compiled.size(); ++o)
        if (auto why = check_bitwise(first_[o], r_.compiled[o]))
          r_.mismatches.push_back("output " + std::to_string(o) +
                                  " of the first call was changed by the " + which +
                                  " call: " + *why);
    }
  }

  const TestFunction& fn_;
  const InputMaker& make_;
  CheckOptions o_;
  CompiledFunction compiled_{options_for(o_.mode), nullptr};
  CheckReport r_;
  std::vector<Tensor> pristine_, eager_in_, ref_in_, reference_, magnitude_;
  std::vector<Tensor> first_; // the first compiled call's results, as returned
};

} // namespace

double magnitude_scale_for(double n) { return std::max(1.0, std::sqrt(n)); }

CheckReport check_compiled(const TestFunction& fn, const InputMaker& make,
                           const CheckOptions& options) {
  return Checker(fn, make, options).run();
}

} // namespace kiln::tools
