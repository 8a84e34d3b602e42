// The child-process side of `kiln fuzz`: generating and checking programs (--worker), checking
// one program (--check) and writing a program's traced graph as a .kir repro (--emit-kir).
// These run in their own process, so that a crash takes down only them.
#include "tools/fuzz_worker.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "runtime/error.h"
#include "runtime/grad_mode.h"
#include "tools/commands.h"
#include "tools/fuzz_check.h"
#include "tools/fuzz_rules.h"

namespace kiln::tools {
namespace {

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  KILN_CHECK(f.good(), "kiln fuzz: cannot write '", path, "'");
}

/// The graph text without `// at FILE:LINE` comments (they would name the fuzzer's sources).
std::string without_locations(const std::string& ir) {
  std::istringstream is(ir);
  std::string out;
  for (std::string line; std::getline(is, line);) {
    if (size_t at = line.find("  // at "); at != std::string::npos) line.erase(at);
    out += line + "\n";
  }
  return out;
}

} // namespace

std::string_view finding_kind_name(FindingKind k) {
  switch (k) {
  case FindingKind::none: return "ok";
  case FindingKind::invalid: return "invalid";
  case FindingKind::mismatch: return "mismatch";
  case FindingKind::compiled_error: return "compiled-error";
  case FindingKind::crash: return "crash";
  case FindingKind::hang: return "hang";
  }
  return "?";
}

int finding_exit_code(FindingKind k) {
  switch (k) {
  case FindingKind::none: return 0;
  case FindingKind::mismatch: return 10;
  case FindingKind::compiled_error: return 11;
  case FindingKind::invalid: return 12;
  default: return 13;
  }
}

FindingKind finding_from_exit_code(int code) {
  switch (code) {
  case 0: return FindingKind::none;
  case 10: return FindingKind::mismatch;
  case 11: return FindingKind::compiled_error;
  case 12: return FindingKind::invalid;
  default: return FindingKind::crash;
  }
}

Finding check_program(const Program& p, std::span<const Mode> modes) {
  NoGradGuard no_grad;
  TestFunction fn = [&p](std::span<const Tensor> x) { return run_program(p, x); };
  InputMaker make = [&p] { return make_inputs(p); };
  for (Mode m : modes) {
    CheckOptions o;
    o.mode = m;
    o.magnitude = has_reordered_sums(p);
    o.magnitude_scale = magnitude_scale_for(longest_sum(p));
    o.reference_fn = [&p](std::span<const Tensor> x) {
      return run_program(p, x, RunMode::reference);
    };
    o.magnitude_fn = [&p](std::span<const Tensor> x) {
      return run_program(p, x, RunMode::magnitude);
    };
    CheckReport r = check_compiled(fn, make, o);
    std::string mode(mode_name(m));
    if (r.invalid) return {FindingKind::invalid, mode, one_line(*r.invalid)};
    if (r.compiled_error) return {FindingKind::compiled_error, mode, one_line(*r.compiled_error)};
    if (!r.mismatches.empty()) return {FindingKind::mismatch, mode, one_line(r.mismatches[0])};
  }
  return {};
}

int worker_main(const WorkerArgs& a) {
  std::vector<const Rule*> rules = select_rules(a.ops);
  for (uint64_t i = a.first; i < a.first + a.count; ++i) {
    // The program goes to disk before it runs: if it crashes, the parent finds it there.
    Program p = generate_program(a.seed, i, rules);
    write_file(a.current_path, program_text(p));
    std::cout << "start " << i << std::endl;
    Finding f = check_program(p, a.modes);
    // Kept apart: by the time the parent reads the line, current_path holds the next program.
    if (f.kind != FindingKind::none && f.kind != FindingKind::invalid)
      write_file(a.current_path + "." + std::to_string(i), program_text(p));
    std::cout << "done " << i << " " << finding_kind_name(f.kind) << " " << p.steps.size() << " "
              << (f.mode.empty() ? "-" : f.mode) << " " << f.message << std::endl;
  }
  return 0;
}

int check_main(const std::string& path, std::span<const Mode> modes) {
  std::string text;
  if (std::string why; !read_text(path, text, why)) {
    std::cerr << "kiln fuzz: cannot read '" << path << "': " << why << "\n";
    return 2;
  }
  Finding f = check_program(parse_program(text), modes);
  std::cout << finding_kind_name(f.kind) << " " << f.mode << " " << f.message << "\n";
  return finding_exit_code(f.kind);
}

int emit_kir_main(const std::string& path, const std::string& out, const std::string& header) {
  std::string text;
  if (std::string why; !read_text(path, text, why)) {
    std::cerr << "kiln fuzz: cannot read '" << path << "': " << why << "\n";
    return 2;
  }
  Program p = parse_program(text);
  NoGradGuard no_grad;
  // The traced graph as recorded, run on the eager kernels: no code generation, so even a
  // program that crashes the compiler can be written.
  CompileOptions eager_backend;
  eager_backend.backend = "eager";
  CompiledFunction c(eager_backend, nullptr);
  std::vector<Tensor> in = make_inputs(p);
  std::vector<detail::CallArg> args;
  for (const Tensor& t : in)
    args.push_back({true, t, Scalar(0)});
  ExplainReport r = c.explain(args, [&](std::span<const Tensor> x) { return run_program(p, x); });
  std::ostringstream os;
  os << header;
  for (const ExplainReport::Graph& g : r.graphs)
    os << without_locations(g.ir);
  write_file(out, os.str());
  return r.graphs.size() == 1 ? 0 : 1;
}

} // namespace kiln::tools
