// A sample kiln model plugin: `kiln run --plugin libexample_plugin.so --model plugin_mlp`
// loads this library and calls kiln_register_models, which adds a tiny 16-32-4 MLP.
#include <memory>
#include <utility>

#include <kiln/kiln.h>

#include "frontend/model_registry.h"

namespace {

class PluginMLP : public kiln::nn::Module {
public:
  PluginMLP() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  kiln::Tensor forward(const kiln::Tensor& x) override { return fc2(kiln::relu(fc1(x))); }

  kiln::nn::Linear fc1{16, 32};
  kiln::nn::Linear fc2{32, 4};
};

} // namespace

/// The plugin's entry point, found by name with dlsym.
extern "C" __attribute__((visibility("default"))) void
kiln_register_models(kiln::ModelRegistry& registry) {
  kiln::ModelSpec spec;
  spec.name = "plugin_mlp";
  spec.summary = "sample plugin model: a 16-32-4 MLP (Linear + ReLU)";
  spec.input_shape = {2, 16};
  spec.input_dtype = kiln::DType::f32;
  spec.make = [](uint64_t seed) -> std::shared_ptr<kiln::nn::Module> {
    kiln::manual_seed(seed);
    auto model = std::make_shared<PluginMLP>();
    model->eval();
    return model;
  };
  spec.make_input = [](const kiln::Shape& shape, kiln::DType dtype, uint64_t seed) {
    kiln::manual_seed(seed);
    return kiln::randn(shape, dtype);
  };
  registry.add(std::move(spec));
}
