// The `breaky` zoo model: small Linear layers around data-dependent control flow, so that
// kiln::compile must break the graph at three host reads (each on its own commented line):
// an item() that picks a branch, a nonzero() that picks rows, and an `if (t)` on a tensor.
// Every path is deterministic and valid for any input of shape [N, 32].
#include <memory>

#include "models/zoo.h"
#include "runtime/nn/linear.h"
#include "runtime/ops.h"

namespace kiln::zoo {
namespace {

constexpr int64_t kFeatures = 32;
/// The mean activation above which the `high` branch runs.
constexpr float kThreshold = 0.25f;

class Breaky : public nn::Module {
public:
  Breaky() {
    register_module("fc1", fc1);
    register_module("high", high);
    register_module("low", low);
    register_module("fc2", fc2);
  }

  Tensor forward(const Tensor& x) override {
    Tensor h = relu(fc1(x));

    // Graph break 1 (item): the mean activation is read on the host to choose a branch.
    const float level = h.mean().item<float>();
    h = level > kThreshold ? high(h) : low(h);

    // Graph break 2 (nonzero): the rows whose sum is above the batch's mean row sum; how many
    // there are depends on the data.
    Tensor row_sums = h.sum({1});
    Tensor rows = nonzero(row_sums > row_sums.mean()).flatten();
    // No row selected (all rows equal, or NaN): fall back to all rows; rows.size(0) is a
    // host-side shape, not another read.
    if (rows.size(0) == 0)
      rows = arange(Scalar(h.size(0)), TensorOptions(DType::i64).device(h.device()));
    Tensor summary = index_select(h, 0, rows).mean({0}, /*keepdim=*/true);
    Tensor y = fc2(h + summary);

    // Graph break 3 (condition): `if (t)` converts a one-element tensor to bool on the host.
    const Tensor positive = y.sum() > 0.0;
    if (positive) return relu(y);
    return tanh(y);
  }

  nn::Linear fc1{kFeatures, kFeatures};
  nn::Linear high{kFeatures, kFeatures};
  nn::Linear low{kFeatures, kFeatures};
  nn::Linear fc2{kFeatures, kFeatures};
};

} // namespace

ModelSpec breaky_spec() {
  ModelSpec spec;
  spec.name = "breaky";
  spec.summary = "data-dependent control flow (item branch, nonzero rows, if (t)): graph breaks";
  spec.input_shape = {4, kFeatures};
  spec.input_dtype = DType::f32;
  spec.make = build_in_eval<Breaky>;
  spec.make_input = normal_input;
  return spec;
}

} // namespace kiln::zoo
