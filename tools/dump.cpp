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

#include "codegen/cuda/cuda_target.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/lower.h"
#include "codegen/schedule.h"
#include "ir/dot.h"
#include "ir/mlir.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tools/commands.h"
#include "tools/model_args.h"

namespace kiln::tools {
namespace {

constexpr const char* kDumpUsage =
    "usage: kiln dump MODEL|FILE.kir|- [--stage traced|simplified|all|fused|kernels|llvm|plan]\n"
    "                 [--device cpu|cuda] [--stage cuda|ptx] [--format kir|dot|mlir]\n"
    "                 [-o OUT] [--input SPEC] [--seed N] [--plugin LIB.so --model NAME]\n"
    "  Prints the graphs of one call of MODEL's forward (as kiln::explain traces them), or the\n"
    "  graphs of a .kir file (- for stdin), at a stage of compilation. Graphs are preceded by\n"
    "  a `// graph N` comment line (kir, mlir); dot output is one digraph after another.\n"
    "  --stage S          traced (default): as recorded; simplified: after the default\n"
    "                     pipeline (canonicalize, constant-fold, cse, dce); all: both;\n"
    "                     fused: the fusion groups of the simplified graph and why pairs\n"
    "                     were not fused; kernels: each group's loop IR and schedule;\n"
    "                     llvm (or source): the LLVM IR generated for them (before\n"
    "                     optimisation); plan: the runtime plan's steps and memory plan.\n"
    "                     Each is the lowering pipeline's own stage (codegen/lower.h)\n"
    "  --device D         cpu (default) or cuda: the lowering for the CUDA target, whose\n"
    "                     stages add cuda (the CUDA C++ NVRTC compiles, as source does) and\n"
    "                     ptx (NVRTC's PTX for $KILN_CUDA_ARCH, default sm_90, with ptxas's\n"
    "                     register and spill report); no GPU is needed\n"
    "  --format F         kir (default), dot (Graphviz) or mlir\n"
    "  -o OUT             write to OUT instead of stdout\n";

struct DumpOptions {
  std::string stage = "traced";
  std::string device = "cpu";
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

/// Every graph at the chosen stage(s), separated as the usage says. The stages after
/// `simplified` are the lowering pipeline's own texts (codegen/lower.h).
std::optional<CommandError> render(const DumpOptions& o, const Source& src, std::ostream& os) {
  const bool traced = o.stage == "traced" || o.stage == "all";
  const bool cuda = o.device == "cuda";
  // On CUDA, `cuda` is the source stage, and `ptx` compiles it.
  const bool ptx = o.stage == "ptx";
  const std::optional<codegen::Stage> stage = o.stage == "all" ? codegen::Stage::simplified
                                              : o.stage == "cuda" || o.stage == "ptx"
                                                  ? codegen::Stage::source
                                                  : codegen::parse_stage(o.stage);
  size_t printed = 0;
  auto emit = [&](size_t k, const ir::Graph& g, const char* suffix) {
    // mlir-opt --split-input-file reads one module per `// -----` chunk.
    if (o.format == "mlir" && printed > 0) os << "// -----\n";
    if (o.format != "dot") os << "// graph " << k << (o.stage == "all" ? suffix : "") << "\n";
    print_graph(os, g, o.format);
    ++printed;
  };
  for (size_t k = 0; k < src.module.graphs.size(); ++k) {
    const ir::Graph& g = *src.module.graphs[k];
    if (traced) emit(k, g, ": traced");
    if (!stage) continue;
    codegen::LowerOptions lo;
    lo.schedule = codegen::parse_schedule_override(codegen::schedule_override_env());
    lo.stop_after = *stage;
    if (cuda) lo.target = &codegen::cuda::cuda_target();
    std::string cuda_source;
    if (*stage != codegen::Stage::simplified) {
      os << "// graph " << k << "\n";
      lo.print_stages = {*stage};
      lo.print = [&](codegen::Stage s, const std::string& text) {
        if (ptx) {
          cuda_source = text;
          return;
        }
        if (s != codegen::Stage::fused) {
          os << text;
          return;
        }
        for (size_t at = 0; at < text.size();) { // the fusion log, as comments
          const size_t eol = text.find('\n', at);
          os << "// " << text.substr(at, eol - at) << "\n";
          at = eol == std::string::npos ? text.size() : eol + 1;
        }
      };
    }
    Expected<codegen::CompiledGraph> lowered = codegen::lower(g.clone(), lo);
    if (!lowered)
      return runtime_error(src.name + " graph " + std::to_string(k) + ": " +
                           lowered.error().message());
    if (*stage == codegen::Stage::simplified) emit(k, *lowered->graph, ": simplified");
    if (ptx && cuda_source.find("__global__") != std::string::npos) {
      const codegen::cuda::CudaTarget& target = codegen::cuda::cuda_target();
      Expected<codegen::cuda::NvrtcOutput> out =
          codegen::cuda::nvrtc_compile(cuda_source, src.name + ".cu", target.arch());
      if (!out)
        return runtime_error(src.name + " graph " + std::to_string(k) + ": " +
                             out.error().message());
      for (const codegen::cuda::PtxasReport& r : codegen::cuda::ptxas_reports(out->log))
        os << "// ptxas " << target.arch() << " " << r.kernel << ": " << r.registers
           << " registers, " << r.spill_stores << " bytes spill stores, " << r.spill_loads
           << " bytes spill loads, " << r.stack_bytes << " bytes stack\n";
      os << out->ptx;
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
        flag_value(args, i, "--device", o.device, err) ||
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
  if (o.device != "cpu" && o.device != "cuda")
    return report("dump", usage_error("unknown device '" + o.device + "' (expected cpu or cuda)"));
  if ((o.stage == "cuda" || o.stage == "ptx") && o.device != "cuda")
    return report("dump", usage_error("--stage " + o.stage + " needs --device cuda"));
  if (o.stage == "llvm" && o.device == "cuda")
    return report("dump", usage_error("--stage llvm is the CPU's; on CUDA: cuda or ptx"));
  const bool lowered = o.stage == "fused" || o.stage == "kernels" || o.stage == "llvm" ||
                       o.stage == "source" || o.stage == "plan" || o.stage == "cuda" ||
                       o.stage == "ptx";
  if (o.stage != "traced" && o.stage != "simplified" && o.stage != "all" && !lowered)
    return report("dump", usage_error("unknown stage '" + o.stage +
                                      "' (expected traced, simplified, all, fused, kernels, "
                                      "llvm, plan, or cuda and ptx with --device cuda)"));
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
