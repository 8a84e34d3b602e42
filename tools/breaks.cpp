// `kiln breaks`: the graph-break analyzer. Traces one call of a model's forward with
// kiln::explain and prints its graphs, each break (code, reason, file:line, hint) and guards.
#include <iostream>

#include "tools/commands.h"
#include "tools/model_args.h"

namespace kiln::tools {
namespace {

constexpr const char* kBreaksUsage =
    "usage: kiln breaks MODEL [--json] [--fail-on-break] [--input SPEC] [--seed N]\n"
    "                   [--plugin LIB.so --model NAME]\n"
    "  Traces one call of MODEL's forward and reports the graphs it produces, each graph\n"
    "  break with its code, reason, source location and hint (docs/graph-breaks.md), and the\n"
    "  guards a compiled call would check.\n"
    "  --json             print the report as JSON (schema kiln.explain/1)\n"
    "  --fail-on-break    exit 1 when the forward has any graph break\n";

} // namespace

int breaks_main(std::span<const std::string_view> args) {
  ModelArgs margs;
  bool json = false, fail_on_break = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kBreaksUsage << kModelArgsHelp;
      return 0;
    }
    if (a == "--json") {
      json = true;
      continue;
    }
    if (a == "--fail-on-break") {
      fail_on_break = true;
      continue;
    }
    std::optional<CommandError> err;
    if (margs.take(args, i, err)) {
      if (err) return report("breaks", *err);
      continue;
    }
    return report("breaks", usage_error("unknown option '" + std::string(a) + "'"));
  }

  LoadedRegistry reg;
  if (auto err = LoadedRegistry::load(margs.plugins, reg)) return report("breaks", *err);
  ModelInstance inst;
  if (auto err = instantiate(margs, reg, inst)) return report("breaks", *err);
  ExplainReport rep;
  try {
    rep = explain_model(inst);
  } catch (const Error& e) {
    return report("breaks", runtime_error(e.message()));
  } catch (const std::exception& e) {
    return report("breaks", runtime_error(e.what()));
  }
  if (json) {
    std::cout << rep.to_json();
  } else {
    std::cout << inst.spec->name << " (input " << input_spec_str(inst.input_shape, inst.input_dtype)
              << "): " << rep.str();
  }
  return fail_on_break && rep.break_count() > 0 ? 1 : 0;
}

} // namespace kiln::tools
