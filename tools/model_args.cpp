// The shared model arguments of the model subcommands: flag parsing, --input specs, plugin
// loading (dlopen) and building the chosen model with its input.
#include "tools/model_args.h"

#include <dlfcn.h>

#include <charconv>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "models/zoo.h"
#include "runtime/error.h"
#include "runtime/grad_mode.h"

namespace kiln::tools {

const char* const kModelArgsHelp =
    "  MODEL              a model name (see `kiln zoo`)\n"
    "  --plugin LIB.so    also load the models of a plugin (repeatable); the library exports\n"
    "                     extern \"C\" void kiln_register_models(kiln::ModelRegistry&)\n"
    "  --model NAME       the model to use (same as MODEL; handy after --plugin)\n"
    "  --input SPEC       the input's shape and dtype, e.g. 8x784:f32 or 8x784 (default: the\n"
    "                     model's own input)\n"
    "  --seed N           seed for the weights and the input (default 0)\n"
    "  --input-seed N     seed for the input alone (default: --seed)\n";

namespace {

/// The plugin entry point's signature.
using RegisterFn = void (*)(ModelRegistry&);
constexpr const char* kEntryPoint = "kiln_register_models";

std::string join(const std::vector<ModelSpec>& models) {
  std::string s;
  for (const ModelSpec& m : models)
    s += (s.empty() ? "" : ", ") + m.name;
  return s;
}

} // namespace

bool parse_uint(std::string_view text, uint64_t& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool parse_input_spec(std::string_view spec, InputSpec& out, std::string& error) {
  out = InputSpec{};
  auto fail = [&](const std::string& why) {
    error = "bad --input '" + std::string(spec) + "': " + why +
            " (expected sizes joined by x and an optional dtype, e.g. 8x784:f32)";
    return false;
  };
  std::string_view sizes = spec;
  if (size_t colon = spec.find(':'); colon != std::string_view::npos) {
    std::string_view dt = spec.substr(colon + 1);
    sizes = spec.substr(0, colon);
    if (!parse_dtype(dt, out.dtype)) return fail("unknown dtype '" + std::string(dt) + "'");
    out.has_dtype = true;
  }
  if (sizes.empty()) return fail("no sizes");
  size_t pos = 0;
  while (true) {
    size_t x = sizes.find('x', pos);
    std::string_view part = sizes.substr(pos, x == std::string_view::npos ? sizes.npos : x - pos);
    uint64_t n = 0;
    if (!parse_uint(part, n) || n == 0 || n > (uint64_t{1} << 40))
      return fail("size '" + std::string(part) + "' is not a positive integer");
    out.shape.push_back(static_cast<int64_t>(n));
    if (x == std::string_view::npos) break;
    pos = x + 1;
  }
  return true;
}

std::string input_spec_str(const Shape& shape, DType dtype) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  if (shape.empty()) s = "scalar";
  return s + ":" + std::string(dtype_name(dtype));
}

bool flag_value(std::span<const std::string_view> args, size_t& i, std::string_view flag,
                std::string& out, std::optional<CommandError>& err) {
  std::string_view a = args[i];
  if (a.starts_with(flag) && a.size() > flag.size() && a[flag.size()] == '=') {
    out = a.substr(flag.size() + 1);
    return true;
  }
  if (a != flag) return false;
  if (i + 1 >= args.size()) {
    err = usage_error(std::string(flag) + " needs a value");
    return true;
  }
  out = args[++i];
  return true;
}

bool ModelArgs::take(std::span<const std::string_view> args, size_t& i,
                     std::optional<CommandError>& err) {
  std::string_view a = args[i];
  std::string value;
  if (flag_value(args, i, "--model", value, err)) {
    if (err) return true;
    if (!model_flag.empty() && model_flag != value)
      err = usage_error("--model given twice ('" + model_flag + "' and '" + value + "')");
    model_flag = value;
    return true;
  }
  if (flag_value(args, i, "--plugin", value, err)) {
    if (err) return true;
    plugins.push_back(value);
    return true;
  }
  if (flag_value(args, i, "--input", value, err)) {
    if (err) return true;
    InputSpec spec;
    std::string why;
    if (!parse_input_spec(value, spec, why)) err = usage_error(why);
    input = value;
    return true;
  }
  if (flag_value(args, i, "--seed", value, err)) {
    if (err) return true;
    if (!parse_uint(value, seed))
      err = usage_error("bad --seed '" + value + "': expected a non-negative integer");
    return true;
  }
  if (flag_value(args, i, "--input-seed", value, err)) {
    if (err) return true;
    uint64_t n = 0;
    if (!parse_uint(value, n))
      err = usage_error("bad --input-seed '" + value + "': expected a non-negative integer");
    input_seed = n;
    return true;
  }
  if (a == "-" || a.starts_with("-")) return false;
  if (!positional.empty()) {
    err = usage_error("more than one model given ('" + positional + "' and '" + std::string(a) +
                      "')");
    return true;
  }
  positional = a;
  return true;
}

std::optional<CommandError> ModelArgs::model_name(std::string& out) const {
  if (!model_flag.empty() && !positional.empty() && model_flag != positional)
    return usage_error("two models given ('" + positional + "' and --model " + model_flag + ")");
  out = !model_flag.empty() ? model_flag : positional;
  if (out.empty()) return usage_error("no model given (see `kiln zoo` for the names)");
  return std::nullopt;
}

std::optional<CommandError> LoadedRegistry::load(const std::vector<std::string>& plugins,
                                                 LoadedRegistry& out) {
  out.registry_ = zoo::registry();
  out.origins_.assign(out.registry_.models().size(), "");
  for (const std::string& plugin : plugins) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(plugin, ec))
      return runtime_error("plugin '" + plugin + "' not found (no such file)");
    // dlopen searches the library path for a name without a slash; a plugin is a file.
    std::string path = std::filesystem::absolute(plugin, ec).string();
    if (ec) path = plugin;
    // The handle is never closed: the registered models' code and closures live in it.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      return runtime_error("cannot load plugin '" + plugin + "': " + (why ? why : "dlopen failed"));
    }
    dlerror();
    void* sym = dlsym(handle, kEntryPoint);
    if (sym == nullptr)
      return runtime_error("plugin '" + plugin + "' does not export " + kEntryPoint +
                           " (expected extern \"C\" void kiln_register_models("
                           "kiln::ModelRegistry&))");
    auto register_models = reinterpret_cast<RegisterFn>(sym);
    // Registered into a scratch registry first, so a clash names the plugin and the model.
    ModelRegistry added;
    try {
      register_models(added);
    } catch (const Error& e) {
      return runtime_error("plugin '" + plugin + "': " + kEntryPoint + " failed: " + e.message());
    } catch (const std::exception& e) {
      return runtime_error("plugin '" + plugin + "': " + kEntryPoint + " failed: " + e.what());
    }
    if (added.models().empty())
      std::cerr << "kiln: warning: plugin '" << plugin << "' registered no models\n";
    for (const ModelSpec& m : added.models()) {
      if (out.registry_.find(m.name) != nullptr)
        return runtime_error("plugin '" + plugin + "' registers model '" + m.name +
                             "', but a model of that name is already known");
      out.registry_.add(m);
      out.origins_.push_back(plugin);
    }
  }
  return std::nullopt;
}

std::optional<CommandError> LoadedRegistry::find(const std::string& name,
                                                 const ModelSpec*& out) const {
  out = registry_.find(name);
  if (out != nullptr) return std::nullopt;
  return usage_error("unknown model '" + name + "'; known models: " + join(registry_.models()));
}

std::optional<CommandError> instantiate(const ModelArgs& args, const LoadedRegistry& reg,
                                        ModelInstance& out) {
  std::string name;
  if (auto err = args.model_name(name)) return err;
  if (auto err = reg.find(name, out.spec)) return err;
  const ModelSpec& spec = *out.spec;
  out.input_shape = spec.input_shape;
  out.input_dtype = spec.input_dtype;
  if (!args.input.empty()) {
    InputSpec in;
    std::string why;
    if (!parse_input_spec(args.input, in, why)) return usage_error(why);
    out.input_shape = in.shape;
    if (in.has_dtype) out.input_dtype = in.dtype;
  }
  if (!spec.make_input)
    return runtime_error("model '" + name + "' has no input maker (make_input)");
  try {
    out.module = spec.make(args.seed);
    if (!out.module) return runtime_error("model '" + name + "': make returned no module");
    out.input = spec.make_input(out.input_shape, out.input_dtype, args.input_seed_or_seed());
  } catch (const Error& e) {
    return runtime_error("building model '" + name + "': " + e.message());
  } catch (const std::exception& e) {
    return runtime_error("building model '" + name + "': " + e.what());
  }
  return std::nullopt;
}

ExplainReport explain_model(const ModelInstance& inst) {
  NoGradGuard no_grad;
  return compile_model(inst).explain(inst.input);
}

int report(std::string_view cmd, const CommandError& err) {
  std::cerr << "kiln " << cmd << ": error: " << err.message << "\n";
  if (err.exit_code == 2) std::cerr << "(`kiln " << cmd << " --help` lists the options)\n";
  return err.exit_code;
}

} // namespace kiln::tools
