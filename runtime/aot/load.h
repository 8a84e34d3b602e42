// kiln::aot::load: a library that `kiln aot` built, loaded into a C++ program and called with
// kiln::Tensors. It goes through the library's C ABI (include/kiln/kiln_aot.h) as any other
// program would: the library carries its own copy of kiln's runtime, and nothing but the
// tensors' bytes crosses between the two.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace kiln::aot {

/// One model of a loaded library. Calls are serialised (a model is not re-entrant); load the
/// library's model twice to run two calls at once.
class LoadedModel {
public:
  /// Runs the model on CPU tensors of its input types (made contiguous) and returns its
  /// outputs as new tensors. A kiln::Error with the library's message on bad input.
  std::vector<Tensor> operator()(std::span<const Tensor> inputs) const;
  /// The one-input, one-output form.
  Tensor operator()(const Tensor& x) const;

  size_t num_inputs() const;
  size_t num_outputs() const;
  /// Input or output i: its dtype and sizes.
  std::pair<DType, Shape> input(size_t i) const;
  std::pair<DType, Shape> output(size_t i) const;
  /// The library's JSON (name, kiln version, graph hash, cpu, inputs, outputs, ...).
  std::string describe() const;

  struct State;

private:
  friend LoadedModel load(const std::string& path, const std::string& weights);
  std::shared_ptr<State> state_;
};

/// Loads libN.so (dlopen, RTLD_LOCAL) and creates its model with the weights of `weights`
/// (empty: the library's own: embedded, or N.safetensors beside it). A kiln::Error naming the
/// path when the library does not load, is not a kiln library, or create fails.
LoadedModel load(const std::string& path, const std::string& weights = "");

} // namespace kiln::aot
