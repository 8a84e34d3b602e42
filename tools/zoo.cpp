// `kiln zoo`: every model the command line knows by name (the zoo, plus each --plugin's), with
// its default input and summary.
#include <algorithm>
#include <iomanip>
#include <iostream>

#include "tools/commands.h"
#include "tools/model_args.h"

namespace kiln::tools {
namespace {

constexpr const char* kZooUsage =
    "usage: kiln zoo [--plugin LIB.so]...\n"
    "  Lists the models `kiln run`, `kiln breaks` and `kiln dump` know by name: the built-in\n"
    "  zoo and the models of each plugin, with the default input and a summary.\n"
    "  --plugin LIB.so    also list the models of a plugin (repeatable)\n";

} // namespace

int zoo_main(std::span<const std::string_view> args) {
  ModelArgs margs;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kZooUsage;
      return 0;
    }
    std::optional<CommandError> err;
    if (a.starts_with("--plugin") && margs.take(args, i, err)) {
      if (err) return report("zoo", *err);
      continue;
    }
    if (!a.starts_with("-"))
      return report("zoo", usage_error("unexpected argument '" + std::string(a) + "'"));
    return report("zoo", usage_error("unknown option '" + std::string(a) + "'"));
  }

  LoadedRegistry reg;
  if (auto err = LoadedRegistry::load(margs.plugins, reg)) return report("zoo", *err);
  const std::vector<ModelSpec>& models = reg.registry().models();
  size_t name_w = 4, input_w = 5;
  std::vector<std::string> inputs;
  for (const ModelSpec& m : models) {
    inputs.push_back(input_spec_str(m.input_shape, m.input_dtype));
    name_w = std::max(name_w, m.name.size());
    input_w = std::max(input_w, inputs.back().size());
  }
  std::cout << std::left << std::setw(static_cast<int>(name_w + 2)) << "name"
            << std::setw(static_cast<int>(input_w + 2)) << "input"
            << "summary\n";
  for (size_t k = 0; k < models.size(); ++k) {
    std::cout << std::setw(static_cast<int>(name_w + 2)) << models[k].name
              << std::setw(static_cast<int>(input_w + 2)) << inputs[k] << models[k].summary;
    if (!reg.origins()[k].empty()) std::cout << " [plugin " << reg.origins()[k] << "]";
    std::cout << "\n";
  }
  return 0;
}

} // namespace kiln::tools
