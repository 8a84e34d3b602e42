// The zoo's registry: every built-in model added under its name.
#include "models/zoo.h"

#include "runtime/ops.h"

namespace kiln::zoo {

void register_models(ModelRegistry& registry) {
  registry.add(mlp_spec());
  registry.add(cnn_spec());
  registry.add(gpt_spec());
  registry.add(breaky_spec());
  registry.add(moe_spec());
}

ModelRegistry registry() {
  ModelRegistry r;
  register_models(r);
  return r;
}

Tensor normal_input(const Shape& shape, DType dtype, uint64_t seed) {
  manual_seed(seed);
  return randn(shape, dtype);
}

} // namespace kiln::zoo
