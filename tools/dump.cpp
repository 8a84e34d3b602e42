// `kiln dump`: the IR of a model's forward (the graphs kiln::explain traces) or of a .kir
// file, at one stage of compilation (traced, simplified; fused, kernels and llvm after the
// lowering), as .kir, Graphviz or MLIR.
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cpu/jit.h"
#include "codegen/cpu/kernel_codegen.h"
#include "codegen/schedule.h"
#include "ir/dot.h"
#include "ir/mlir.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/fusion.h"
#include "passes/passes.h"
#include "tools/commands.h"
#include "tools/model_args.h"

namespace kiln::tools {
namespace {

constexpr const char* kDumpUsage =
    "usage: kiln dump MODEL|FILE.kir|- [--stage traced|simplified|all|fused|kernels|llvm]\n"
    "                 [--format kir|dot|mlir]\n"
    "                 [-o OUT] [--input SPEC] [--seed N] [--plugin LIB.so --model NAME]\n"
    "  Prints the graphs of one call of MODEL's forward (as kiln::explain traces them), or the\n"
    "  graphs of a .kir file (- for stdin), at a stage of compilation. Graphs are preceded by\n"
    "  a `// graph N` comment line (kir, mlir); dot output is one digraph after another.\n"
    "  --stage S          traced (default): as recorded; simplified: after the default\n"
    "                     pipeline (canonicalize, constant-fold, cse, dce); all: both;\n"
    "                     fused: the fusion groups of the simplified graph and why pairs\n"
    "                     were not fused; kernels: each group's loop IR and schedule;\n"
    "                     llvm: the LLVM IR generated for them (before optimisation)\n"
    "  --format F         kir (default), dot (Graphviz) or mlir\n"
    "  -o OUT             write to OUT instead of stdout\n";

struct DumpOptions {
  std::string stage = "traced";
  std::string format = "kir";
  std::string output;
  std::string file; // a .kir input instead of a model
};

bool is_kir_file(std::string_view arg) { return arg == "-" || arg.ends_with(".kir"); }

/// The graphs to dump, parsed, with where they came from (for messages).
struct Source {
  std::string name;
  ir::ParsedModule module;
};

std::optional<CommandError> load_file(const DumpOptions& o, Source& src) {
  std::string text;
  src.name = o.file == "-" ? "<stdin>" : o.file;
  if (std::string why; !read_text(o.file, text, why))
    return runtime_error("cannot read '" + o.file + "': " + why);
  Expected<ir::ParsedModule> parsed = ir::parse_module(text, src.name);
  if (!parsed) return runtime_error(parsed.error().message());
  src.module = std::move(*parsed);
  for (const std::unique_ptr<ir::Graph>& g : src.module.graphs) {
    const ir::Node* failed = nullptr;
    if (auto v = ir::verify(*g, &failed); !v) {
      std::string where = src.name;
      if (failed)
        if (auto it = src.module.lines.find(failed); it != src.module.lines.end())
          where += ':' + std::to_string(it->second);
      return runtime_error(where + ": " + v.error().message());
    }
  }
  return std::nullopt;
}

std::optional<CommandError> load_model(const ModelArgs& margs, Source& src) {
  LoadedRegistry reg;
  if (auto err = LoadedRegistry::load(margs.plugins, reg)) return err;
  ModelInstance inst;
  if (auto err = instantiate(margs, reg, inst)) return err;
  src.name = inst.spec->name;
  ExplainReport rep;
  try {
    rep = explain_model(inst);
  } catch (const Error& e) {
    return runtime_error(e.message());
  }
  for (size_t k = 0; k < rep.graphs.size(); ++k) {
    const std::string name = src.name + " graph " + std::to_string(k);
    Expected<std::unique_ptr<ir::Graph>> g = ir::parse_graph(rep.graphs[k].ir, name);
    if (!g)
      return runtime_error("the traced IR of " + name +
                           " does not parse back (a frontend bug): " + g.error().message());
    src.module.graphs.push_back(std::move(*g));
  }
  return std::nullopt;
}

void print_graph(std::ostream& os, const ir::Graph& g, const std::string& format) {
  if (format == "kir")
    ir::print(os, g);
  else if (format == "dot")
    os << ir::to_dot(g);
  else
    os << ir::to_mlir(g);
}

/// Every graph at the chosen stage(s), separated as the usage says.
std::optional<CommandError> render(const DumpOptions& o, const Source& src, std::ostream& os) {
  const bool traced = o.stage == "traced" || o.stage == "all";
  const bool simplified = o.stage == "simplified" || o.stage == "all";
  const passes::PassManager pipeline = passes::default_pipeline();
  size_t printed = 0;
  auto emit = [&](size_t k, const ir::Graph& g, const char* stage) {
    // mlir-opt --split-input-file reads one module per `// -----` chunk.
    if (o.format == "mlir" && printed > 0) os << "// -----\n";
    if (o.format != "dot") os << "// graph " << k << (o.stage == "all" ? stage : "") << "\n";
    print_graph(os, g, o.format);
    ++printed;
  };
  const bool lowered = o.stage == "fused" || o.stage == "kernels" || o.stage == "llvm";
  for (size_t k = 0; k < src.module.graphs.size(); ++k) {
    const ir::Graph& g = *src.module.graphs[k];
    if (lowered) {
      std::unique_ptr<ir::Graph> s = g.clone();
      passes::PassContext ctx;
      if (auto r = pipeline.run(*s, ctx); !r)
        return runtime_error(src.name + " graph " + std::to_string(k) + ": " + r.error().message());
      os << "// graph " << k << "\n";
      passes::FusionResult fusion = passes::fuse(*s);
      if (o.stage == "fused") {
        for (const std::string& line : fusion.log)
          os << "// " << line << "\n";
        continue;
      }
      std::vector<ir::kernel::Kernel> kernels;
      std::vector<codegen::Schedule> schedules;
      const int width = codegen::cpu::host_target().vector_bytes;
      const codegen::ScheduleOverride fixed =
          codegen::parse_schedule_override(codegen::schedule_override_env());
      for (size_t gi = 0; gi < fusion.groups.size(); ++gi) {
        std::vector<const ir::Value*> buffers;
        try {
          kernels.push_back(
              passes::lower_group(fusion.groups[gi], "kiln_k" + std::to_string(gi), buffers));
        } catch (const Error& e) {
          return runtime_error(src.name + " graph " + std::to_string(k) + " group " +
                               std::to_string(gi) + ": " + e.what());
        }
        schedules.push_back(codegen::choose_schedule(kernels.back(), width, fixed));
      }
      if (o.stage == "llvm") {
        os << codegen::cpu::kernels_llvm_ir(kernels, schedules);
        continue;
      }
      for (size_t gi = 0; gi < kernels.size(); ++gi)
        os << "// schedule " << schedules[gi].str() << "\n" << kernels[gi].str();
      continue;
    }
    if (traced) emit(k, g, ": traced");
    if (simplified) {
      std::unique_ptr<ir::Graph> s = g.clone();
      passes::PassContext ctx;
      if (auto r = pipeline.run(*s, ctx); !r)
        return runtime_error(src.name + " graph " + std::to_string(k) + ": " + r.error().message());
      emit(k, *s, ": simplified");
    }
  }
  return std::nullopt;
}

} // namespace

int dump_main(std::span<const std::string_view> args) {
  DumpOptions o;
  ModelArgs margs;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kDumpUsage << kModelArgsHelp;
      return 0;
    }
    std::optional<CommandError> err;
    if (flag_value(args, i, "--stage", o.stage, err) ||
        flag_value(args, i, "--format", o.format, err) ||
        flag_value(args, i, "-o", o.output, err)) {
      if (err) return report("dump", *err);
      continue;
    }
    if (is_kir_file(a)) {
      if (!o.file.empty()) return report("dump", usage_error("more than one .kir file given"));
      o.file = a;
      continue;
    }
    if (margs.take(args, i, err)) {
      if (err) return report("dump", *err);
      continue;
    }
    return report("dump", usage_error("unknown option '" + std::string(a) + "'"));
  }
  const bool lowered = o.stage == "fused" || o.stage == "kernels" || o.stage == "llvm";
  if (o.stage != "traced" && o.stage != "simplified" && o.stage != "all" && !lowered)
    return report("dump",
                  usage_error("unknown stage '" + o.stage +
                              "' (expected traced, simplified, all, fused, kernels or llvm)"));
  if (lowered && o.format != "kir")
    return report("dump", usage_error("--stage " + o.stage + " prints text only (no --format)"));
  if (o.format != "kir" && o.format != "dot" && o.format != "mlir")
    return report("dump",
                  usage_error("unknown format '" + o.format + "' (expected kir, dot or mlir)"));
  if (!o.file.empty() && (!margs.positional.empty() || !margs.model_flag.empty()))
    return report("dump", usage_error("give a model or a .kir file, not both"));

  Source src;
  std::optional<CommandError> err = o.file.empty() ? load_model(margs, src) : load_file(o, src);
  if (err) return report("dump", *err);
  std::ostringstream out;
  try {
    err = render(o, src, out);
  } catch (const Error& e) {
    err = runtime_error(src.name + ": " + e.message());
  }
  if (err) return report("dump", *err);

  if (o.output.empty()) {
    std::cout << out.str();
    return 0;
  }
  std::ofstream f(o.output, std::ios::binary | std::ios::trunc);
  f << out.str();
  if (!f.flush()) return report("dump", runtime_error("cannot write '" + o.output + "'"));
  return 0;
}

} // namespace kiln::tools
