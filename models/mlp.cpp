// The `mlp` zoo model: a 784-256-128-10 classifier (Linear + ReLU) with a LayerNorm after the
// first layer. Parameter names as a PyTorch module with attributes fc1, norm, fc2, fc3.
#include <memory>
#include <vector>

#include "models/zoo.h"
#include "runtime/nn/linear.h"
#include "runtime/nn/norm.h"
#include "runtime/ops.h"

namespace kiln::zoo {
namespace {

class MLP : public nn::Module {
public:
  MLP() {
    register_module("fc1", fc1);
    register_module("norm", norm);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }

  Tensor forward(const Tensor& x) override { return fc3(relu(fc2(relu(norm(fc1(x)))))); }

  nn::Linear fc1{784, 256};
  nn::LayerNorm norm{std::vector<int64_t>{256}};
  nn::Linear fc2{256, 128};
  nn::Linear fc3{128, 10};
};

} // namespace

ModelSpec mlp_spec() {
  ModelSpec spec;
  spec.name = "mlp";
  spec.summary = "784-256-128-10 MLP (Linear + ReLU) with a LayerNorm after the first layer";
  spec.input_shape = {1, 784};
  spec.input_dtype = DType::f32;
  spec.make = build_in_eval<MLP>;
  spec.make_input = normal_input;
  return spec;
}

} // namespace kiln::zoo
