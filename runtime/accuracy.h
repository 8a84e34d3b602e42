// The f64 reference rule: when a compiled floating result counts as equal to eager
// (docs/accuracy.md). One implementation, used by the differential tests, the test macros,
// `kiln run` and `kiln fuzz`.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace kiln {

struct AccuracyOptions {
  /// The magnitude of what each result element was computed from, broadcastable to the
  /// output: for sum-like results, the same function run in f64 on |inputs| (Σ|terms|).
  /// Where inputs cancel, the honest error of a reordered sum scales with the terms, not
  /// with the result. Undefined: the floor scales with max|reference| over the output only.
  Tensor magnitude;
  /// Where eager holds a zero, a zero of the other sign differs (neg(0.0) is -0.0).
  bool zero_sign = false;
};

/// The error factor of the rule: 2 for f32/f64, 3 for f16/bf16.
double accuracy_factor(DType t);
/// The machine epsilon of a floating dtype (f32 2^-23, f64 2^-52, f16 2^-10, bf16 2^-7).
double dtype_eps(DType t);

/// Checks `got` (a compiled result) against `eager` (the same function run eagerly) and
/// `reference` (run eagerly on f64 copies of the inputs, any dtype; undefined when no f64
/// run is meaningful: then eager is the reference). Nothing when it passes; else the first
/// failing element described (index, values, the errors and the bound) and the count.
///
/// Floating outputs pass where, element by element,
///   |got - ref| <= factor(dtype) * |eager - ref| + 8 * eps(dtype) * scale,
/// scale = max(max |ref| over the output where eager is finite, magnitude at the element);
/// NaN and ±Inf positions match eager's exactly. Integers and bools match eager exactly. Dtype and
/// shape always match eager's.
std::optional<std::string> check_accuracy(const Tensor& got, const Tensor& eager,
                                          const Tensor& reference,
                                          const AccuracyOptions& options = {});

/// Same dtype, shape and bits per element (NaN payloads included): the exact rule, for
/// results where no f64 run is meaningful (random ops, integer wrap-around). Nothing when
/// equal; else the first differing element described.
std::optional<std::string> check_bitwise(const Tensor& got, const Tensor& want);

/// Copies of `inputs` with every floating tensor converted to f64 (others copied as they
/// are; undefined tensors stay undefined): the inputs of the reference run, which may write
/// them without touching the originals.
std::vector<Tensor> to_f64(std::span<const Tensor> inputs);
/// to_f64 of |inputs| (floating inputs only): the inputs of a magnitude run.
std::vector<Tensor> to_f64_abs(std::span<const Tensor> inputs);

} // namespace kiln
