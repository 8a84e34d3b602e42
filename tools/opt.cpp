// `kiln opt`: text IR in, passes, text IR (or Graphviz, or MLIR) out. The main surface of the
// .kir tests.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/lower.h"
#include "ir/dot.h"
#include "ir/kernel/parser.h"
#include "ir/mlir.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "runtime/logs.h"
#include "tools/commands.h"

namespace kiln::tools {

bool read_text(const std::string& path, std::string& text, std::string& why) {
  // libstdc++'s filebuf throws std::ios_base::failure when read(2) fails (a directory opens
  // but cannot be read), whatever the stream's exception mask says: catch it here.
  try {
    if (path == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), {});
      return true;
    }
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      why = "is a directory";
      return false;
    }
    errno = 0;
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      why = errno ? std::strerror(errno) : "cannot open";
      return false;
    }
    text.assign(std::istreambuf_iterator<char>(f), {});
    if (f.bad()) {
      why = "read error";
      return false;
    }
    return true;
  } catch (const std::ios_base::failure& e) {
    why = e.code() ? e.code().message() : std::string("read error");
    return false;
  }
}

namespace {

constexpr const char* kOptUsage =
    "usage: kiln opt FILE.kir|- [--passes=a,b,c] [-o OUT] [--verify-each] [--print-after-all]\n"
    "                [--no-verify] [--format kir|dot|mlir] [--print=fused|kernels|llvm|plan]\n"
    "       kiln opt FILE.kir|- [--kernel] [--run [--input NAME=v,v,...]...] [-o OUT]\n"
    "  Parses FILE (- for stdin), verifies it, runs the passes in order and prints the result.\n"
    "  Loop IR (kernels, as `kiln dump --stage kernels` prints them: the first line that is\n"
    "  not blank or a // comment starts with `kernel` or `schedule`, or a `// schedule` line\n"
    "  comes first) is parsed, verified and printed back; passes do not apply to it. Its\n"
    "  grammar and the verifier's rules: docs/ir.md, \"The loop IR\".\n"
    "  --passes=LIST      comma-separated pass names (see --list-passes)\n"
    "  -o OUT             write the result to OUT instead of stdout\n"
    "  --verify-each      run the verifier after every pass\n"
    "  --print-after-all  print the IR to stderr after every pass\n"
    "  --no-verify        do not verify the input (--run verifies kernels anyway)\n"
    "  --format F         output kir (default), dot (Graphviz) or mlir\n"
    "  --print=S          after the passes, whose last must be `fuse`, print stage S of the\n"
    "                     lowering instead of the graph: fused (the fusion log), kernels (the\n"
    "                     loop IR with schedules), llvm (the LLVM IR), plan (the steps)\n"
    "  --list-passes      list the known passes and exit\n"
    "  --kernel           read FILE as loop IR whatever it starts with\n"
    "  --run              (loop IR) compile the kernels with the CPU JIT, each under its\n"
    "                     schedule line or else the heuristic's, run them and print each\n"
    "                     output buffer as `NAME = [v, ...]` (%.9g for f32/f16/bf16, %.17g\n"
    "                     for f64) after a `// kernel NAME` line\n"
    "  --input NAME=v,... (with --run; repeatable) the contents of every buffer NAME, one\n"
    "                     value per element of its extent; an input buffer not given holds\n"
    "                     its element index i (bool: i odd), an output starts as zeros\n";

struct OptOptions {
  std::string input;
  std::string output;
  std::string passes;
  std::string format = "kir";
  std::string print; // a lowering stage to print instead of the graph
  bool verify_each = false;
  bool print_after_all = false;
  bool verify_input = true;
  bool kernel = false;
  bool run = false;
  std::vector<std::string> inputs;
};

int usage_error(const std::string& msg) {
  std::cerr << "kiln opt: " << msg << "\n" << kOptUsage;
  return 2;
}

/// "FILE:LINE: error: MSG" when the failing node's line is known, else "FILE: error: MSG".
std::string located(const std::string& file, const ir::ParsedModule& m, const ir::Node* node,
                    const std::string& msg) {
  std::ostringstream os;
  os << file;
  if (node)
    if (auto it = m.lines.find(node); it != m.lines.end()) os << ':' << it->second;
  os << ": error: " << msg;
  return os.str();
}

/// Prints the result to stdout, or writes it to `path`; the exit code.
int write_result(const std::string& path, const std::string& text) {
  if (path.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f.flush()) {
    std::cerr << "kiln opt: cannot write '" << path << "'\n";
    return 1;
  }
  return 0;
}

/// The graphs of a .kir text through the passes; each printed in o.format, or the lowering's
/// `stage` of it (after the fuse pass). Returns the exit status.
int opt_graphs(const OptOptions& o, const passes::PassManager& pm,
               std::optional<codegen::Stage> stage, const std::string& text,
               const std::string& file, std::ostream& out) {
  Expected<ir::ParsedModule> parsed = ir::parse_module(text, file);
  if (!parsed) {
    std::cerr << parsed.error().message() << "\n";
    return 1;
  }
  ir::ParsedModule& module = *parsed;

  passes::PassContext ctx;
  ctx.verify_each = o.verify_each;
  ctx.print_after_all = o.print_after_all;
  ctx.log_passes = log_enabled("passes");
  try {
    for (size_t k = 0; k < module.graphs.size(); ++k) {
      ir::Graph& g = *module.graphs[k];
      if (o.verify_input) {
        const ir::Node* failed = nullptr;
        if (auto v = ir::verify(g, &failed); !v) {
          std::cerr << located(file, module, failed, v.error().message()) << "\n";
          return 1;
        }
      }
      ctx.fusion.reset();
      if (auto r = pm.run(g, ctx); !r) {
        std::cerr << file << ": error: " << r.error().message() << "\n";
        return 1;
      }
      if (k) out << "\n";
      if (stage) {
        if (!ctx.fusion) {
          std::cerr << "kiln opt: --print=" << o.print << " needs the fuse pass last in --passes\n";
          return 2;
        }
        codegen::LowerOptions lo;
        lo.simplify = false;
        lo.fusion = ctx.fusion;
        lo.stop_after = *stage;
        lo.print_stages = {*stage};
        lo.print = [&](codegen::Stage, const std::string& text) { out << text; };
        if (auto r = codegen::lower(std::move(module.graphs[k]), lo); !r) {
          std::cerr << file << ": error: " << r.error().message() << "\n";
          return 1;
        }
        continue;
      }
      if (o.format == "kir")
        ir::print(out, g);
      else if (o.format == "dot")
        out << ir::to_dot(g);
      else
        out << ir::to_mlir(g);
    }
  } catch (const Error& e) {
    std::cerr << file << ": error: " << e.message() << "\n";
    return 1;
  }

  return 0;
}

} // namespace

int opt_main(std::span<const std::string_view> args) {
  OptOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    auto value = [&](std::string_view flag, std::string& out) {
      if (a.starts_with(flag) && a.size() > flag.size() && a[flag.size()] == '=') {
        out = a.substr(flag.size() + 1);
        return true;
      }
      if (a == flag && i + 1 < args.size()) {
        out = args[++i];
        return true;
      }
      return false;
    };
    if (a == "-h" || a == "--help") {
      std::cout << kOptUsage;
      return 0;
    }
    if (a == "--list-passes") {
      for (const passes::PassInfo& p : passes::registered_passes())
        std::cout << p.name << "  " << p.summary << "\n";
      return 0;
    }
    if (value("--passes", o.passes) || value("-o", o.output) || value("--format", o.format) ||
        value("--print", o.print))
      continue;
    if (std::string input; value("--input", input)) {
      o.inputs.push_back(std::move(input));
      continue;
    }
    if (a == "--verify-each") {
      o.verify_each = true;
    } else if (a == "--print-after-all") {
      o.print_after_all = true;
    } else if (a == "--no-verify") {
      o.verify_input = false;
    } else if (a == "--kernel") {
      o.kernel = true;
    } else if (a == "--run") {
      o.run = true;
    } else if (a == "-" || !a.starts_with("-")) {
      if (!o.input.empty()) return usage_error("more than one input file");
      o.input = a;
    } else {
      return usage_error("unknown option '" + std::string(a) + "'");
    }
  }
  if (o.input.empty()) return usage_error("no input file (use - for stdin)");
  if (o.format != "kir" && o.format != "dot" && o.format != "mlir")
    return usage_error("unknown format '" + o.format + "' (expected kir, dot or mlir)");

  std::optional<codegen::Stage> stage;
  if (!o.print.empty()) {
    stage = codegen::parse_stage(o.print);
    if (!stage || *stage == codegen::Stage::simplified)
      return usage_error("unknown --print stage '" + o.print +
                         "' (expected fused, kernels, llvm or plan)");
    if (o.format != "kir") return usage_error("--print prints text only (no --format)");
  }
  passes::PassManager pm;
  try {
    pm = passes::PassManager::parse(o.passes);
  } catch (const Error& e) {
    std::cerr << "kiln opt: " << e.message() << "\n";
    return 2;
  }

  std::string text;
  if (std::string why; !read_text(o.input, text, why)) {
    std::cerr << "kiln opt: cannot read '" << o.input << "': " << why << "\n";
    return 1;
  }
  const std::string file = o.input == "-" ? "<stdin>" : o.input;
  if (o.kernel || ir::kernel::is_kernel_text(text)) {
    if (!o.passes.empty()) return usage_error("--passes applies to graphs, not to loop IR");
    if (o.format != "kir") return usage_error("loop IR prints only as kir");
    if (!o.inputs.empty() && !o.run) return usage_error("--input needs --run");
    std::ostringstream kout;
    const int rc = opt_kernels(text, file, {o.verify_input, o.run, o.inputs}, kout);
    if (rc != 0) return rc;
    return write_result(o.output, kout.str());
  }
  if (o.run || !o.inputs.empty()) return usage_error("--run and --input apply to loop IR");
  std::ostringstream out;
  if (const int rc = opt_graphs(o, pm, stage, text, file, out); rc != 0) return rc;
  return write_result(o.output, out.str());
}

} // namespace kiln::tools
