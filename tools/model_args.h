// The model arguments every model subcommand shares (zoo, run, breaks, dump): MODEL or
// --model NAME, --plugin LIB (repeatable), --input SPEC and --seed N; plugin loading; and
// the registry that results (the zoo plus every plugin's models).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frontend/compile.h"
#include "frontend/model_registry.h"
#include "runtime/dtype.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace kiln::tools {

/// The lines of `--help` that describe the shared model arguments.
extern const char* const kModelArgsHelp;

/// An input description: "8x784:f32" (sizes joined by x, then the dtype) or "8x784" (the
/// model's default dtype). Every size is a positive integer.
struct InputSpec {
  Shape shape;
  DType dtype = DType::f32;
  bool has_dtype = false;
};
/// Parses SPEC into `out`; false (with `error` set) when it is malformed.
bool parse_input_spec(std::string_view spec, InputSpec& out, std::string& error);
/// "8x784:f32".
std::string input_spec_str(const Shape& shape, DType dtype);

/// A subcommand's failure: a message for `kiln CMD: error: ...` and the exit code (2 for a
/// usage error, 1 for a runtime failure).
struct CommandError {
  std::string message;
  int exit_code = 1;
};

/// What the shared model flags said.
struct ModelArgs {
  /// The positional MODEL (or FILE.kir for dump), empty when not given.
  std::string positional;
  /// --model NAME.
  std::string model_flag;
  std::vector<std::string> plugins;
  std::string input; // raw --input spec, empty for the model's default input
  uint64_t seed = 0;
  /// --input-seed N: the input's seed when it differs from the weights' (default: --seed).
  std::optional<uint64_t> input_seed;
  uint64_t input_seed_or_seed() const { return input_seed.value_or(seed); }

  /// Consumes args[i] (and its value, advancing i) when it is one of the shared flags
  /// (--model, --plugin, --input, --seed, --input-seed, each as `--flag V` or `--flag=V`) or a
  /// positional argument. Returns false when args[i] is not one of them; on a malformed value sets
  /// `err` (a usage error) and returns true.
  bool take(std::span<const std::string_view> args, size_t& i, std::optional<CommandError>& err);

  /// The model name: --model NAME, else the positional argument; an error when neither or
  /// two different names are given.
  std::optional<CommandError> model_name(std::string& out) const;
};

/// The zoo plus the models of every plugin named in `plugins`, which stay loaded for the
/// life of the process (their models' code lives in them).
class LoadedRegistry {
public:
  /// Loads each plugin (dlopen RTLD_NOW|RTLD_LOCAL, then kiln_register_models). A missing
  /// file, a library that does not load, a missing entry point or a registration that throws
  /// is a runtime error naming the plugin.
  static std::optional<CommandError> load(const std::vector<std::string>& plugins,
                                          LoadedRegistry& out);
  const ModelRegistry& registry() const { return registry_; }
  /// The plugin each model came from ("" for the zoo), parallel to registry().models().
  const std::vector<std::string>& origins() const { return origins_; }
  /// The model named `name`, or a usage error that lists the known models.
  std::optional<CommandError> find(const std::string& name, const ModelSpec*& out) const;

private:
  ModelRegistry registry_;
  std::vector<std::string> origins_;
};

/// A model built and ready to call: the spec, its module (weights from the seed) and its
/// input (the default one, or --input).
struct ModelInstance {
  const ModelSpec* spec = nullptr;
  std::shared_ptr<nn::Module> module;
  Tensor input;
  Shape input_shape;
  DType input_dtype = DType::f32;
};

/// Resolves the model of `args` in `reg`, builds it and makes its input. Usage errors for a
/// missing or unknown model or a bad --input; a runtime error when building throws.
std::optional<CommandError> instantiate(const ModelArgs& args, const LoadedRegistry& reg,
                                        ModelInstance& out);

/// The model's forward compiled with its module's guards (train/eval mode, parameter
/// identity), as kiln::compile(module) would give, also for specs with their own forward.
inline auto compile_model(const ModelInstance& inst, CompileOptions options = {}) {
  auto fn = [spec = inst.spec, module = inst.module.get()](const Tensor& x) {
    return run_model(*spec, *module, x);
  };
  return Compiled<decltype(fn)>(fn, std::move(options), inst.module.get());
}

/// Traces one call of the model's forward on its input with kiln::explain (no grad, the
/// module's guards included) and returns what it found. Throws kiln::Error on failure.
ExplainReport explain_model(const ModelInstance& inst);

/// Prints `kiln CMD: error: MSG` to stderr (and, after a usage error, where the options are
/// described) and returns the error's exit code.
int report(std::string_view cmd, const CommandError& err);

/// A usage error (exit 2).
inline CommandError usage_error(std::string message) { return {std::move(message), 2}; }
/// A runtime failure (exit 1).
inline CommandError runtime_error(std::string message) { return {std::move(message), 1}; }

/// Reads `--flag V` / `--flag=V` at args[i] into `out` (advancing i past V); false when
/// args[i] is not that flag. The flag last with no value sets `err` (a usage error).
bool flag_value(std::span<const std::string_view> args, size_t& i, std::string_view flag,
                std::string& out, std::optional<CommandError>& err);

/// Parses a non-negative integer; false for anything else.
bool parse_uint(std::string_view text, uint64_t& out);

} // namespace kiln::tools
