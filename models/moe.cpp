// The `moe` zoo model: a top-2 mixture of four experts. The routing uses fixed shapes only
// (argmax, a mask of the chosen expert, argmax again), and every expert runs densely on every
// token, so the whole forward captures as one graph.
#include <limits>
#include <memory>

#include "models/zoo.h"
#include "runtime/nn/container.h"
#include "runtime/nn/linear.h"
#include "runtime/ops.h"

namespace kiln::zoo {
namespace {

constexpr int64_t kFeatures = 64;
constexpr int64_t kHidden = 128;
constexpr int64_t kExperts = 4;

/// One expert: a 64 -> 128 -> 64 GELU MLP.
class Expert : public nn::Module {
public:
  Expert() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  Tensor forward(const Tensor& x) override { return fc2(gelu(fc1(x))); }

  nn::Linear fc1{kFeatures, kHidden};
  nn::Linear fc2{kHidden, kFeatures};
};

class MoE : public nn::Module {
public:
  MoE() {
    register_module("gate", gate);
    for (int64_t i = 0; i < kExperts; ++i)
      experts->push_back(std::make_shared<Expert>());
    register_module("experts", experts);
  }

  /// Tokens [..., 64] to [..., 64]: the two best-scored experts' outputs, weighted by their
  /// gate scores renormalised over the two.
  Tensor forward(const Tensor& x) override {
    Tensor scores = softmax(gate(x), -1); // [..., E]
    Tensor ids = arange(Scalar(kExperts), TensorOptions(DType::i64).device(x.device()));
    // The chosen expert as a mask: one_hot(first) != 0, written as a comparison with the
    // expert ids because one_hot checks its indices' range on the host (a graph break).
    Tensor first = eq(argmax(scores, -1, /*keepdim=*/true), ids);
    const double neg_inf = -std::numeric_limits<double>::infinity();
    Tensor second = eq(argmax(masked_fill(scores, first, neg_inf), -1, /*keepdim=*/true), ids);
    Tensor weights = where(logical_or(first, second), scores, 0.0);
    weights = weights / sum(weights, {-1}, /*keepdim=*/true);
    Tensor out;
    for (int64_t e = 0; e < kExperts; ++e) {
      Tensor y = weights.narrow(-1, e, 1) * experts->at(e)->forward(x);
      out = out.defined() ? out + y : y;
    }
    return out;
  }

  nn::Linear gate{kFeatures, kExperts};
  std::shared_ptr<nn::ModuleList> experts = std::make_shared<nn::ModuleList>();
};

} // namespace

ModelSpec moe_spec() {
  ModelSpec spec;
  spec.name = "moe";
  spec.summary = "top-2 mixture of 4 GELU-MLP experts, dense, no data-dependent shapes";
  spec.input_shape = {8, kFeatures};
  spec.input_dtype = DType::f32;
  spec.make = build_in_eval<MoE>;
  spec.make_input = normal_input;
  return spec;
}

} // namespace kiln::zoo
