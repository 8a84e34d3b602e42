// ModelRegistry: add/find by name.
#include "frontend/model_registry.h"

#include "runtime/error.h"

namespace kiln {

void ModelRegistry::add(ModelSpec spec) {
  KILN_CHECK(!spec.name.empty(), "ModelRegistry::add: a model needs a name");
  KILN_CHECK(find(spec.name) == nullptr, "ModelRegistry::add: a model named '", spec.name,
             "' is already registered");
  KILN_CHECK(spec.make != nullptr, "ModelRegistry::add: model '", spec.name,
             "' has no constructor (make)");
  models_.push_back(std::move(spec));
}

const ModelSpec* ModelRegistry::find(const std::string& name) const {
  for (const ModelSpec& m : models_)
    if (m.name == name) return &m;
  return nullptr;
}

const ModelSpec& ModelRegistry::get(const std::string& name) const {
  if (const ModelSpec* m = find(name)) return *m;
  std::string known;
  for (const ModelSpec& m : models_)
    known += (known.empty() ? "" : ", ") + m.name;
  throw Error::without_location("unknown model '" + name + "'; known models: " + known);
}

Tensor run_model(const ModelSpec& spec, nn::Module& module, const Tensor& x) {
  return spec.forward ? spec.forward(module, x) : module.forward(x);
}

} // namespace kiln
