// ModelRegistry: named models the `kiln` CLI runs, compiles and analyses (the zoo, plugins).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/module.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace kiln {

/// One runnable model: its module (built with random weights from a seed), its forward over
/// one input tensor, and the input it takes by default.
struct ModelSpec {
  std::string name;
  std::string summary;
  /// The default input's shape and dtype ("1x784:f32" in CLI terms).
  Shape input_shape;
  DType input_dtype = DType::f32;
  /// Builds the module with weights drawn from `seed` (the caller may then load a
  /// safetensors file into it).
  std::function<std::shared_ptr<nn::Module>(uint64_t seed)> make;
  /// An input of the given shape and dtype (token ids in range for models that take them),
  /// drawn from `seed`.
  std::function<Tensor(const Shape& shape, DType dtype, uint64_t seed)> make_input;
  /// The forward pass; null means `module.forward(x)`.
  std::function<Tensor(nn::Module& module, const Tensor& x)> forward;
};

/// The models known by name. A plugin adds its own through
/// `extern "C" void kiln_register_models(kiln::ModelRegistry&)`.
class ModelRegistry {
public:
  /// Adds a model; a name that is already taken is an error.
  void add(ModelSpec spec);
  /// The model named `name`, or null.
  const ModelSpec* find(const std::string& name) const;
  /// The model named `name`, or an error listing the known names.
  const ModelSpec& get(const std::string& name) const;
  const std::vector<ModelSpec>& models() const { return models_; }

private:
  std::vector<ModelSpec> models_;
};

/// Runs spec's forward on module.
Tensor run_model(const ModelSpec& spec, nn::Module& module, const Tensor& x);

} // namespace kiln
