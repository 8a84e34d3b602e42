// The lowering pipeline: a traced graph in, a runnable CompiledGraph out. lower() runs these
// stages in order (codegen/lower.cpp lists them in one function):
//
//   simplify  ir::Graph         -> ir::Graph              the default pass pipeline
//   gemms     ir::Graph         -> ir::Graph              max_autotune: matmuls a generated
//                                                         kernel computes faster, rewritten;
//                                                         long rows' reductions split (on a
//                                                         device: always, when few rows)
//   fuse      ir::Graph         -> passes::FusionResult   groups, library calls, step order
//   lower     FusionGroup       -> ir::kernel::Kernel     one loop-IR kernel per group
//   schedule  Kernel            -> Schedule               lanes, threads, grain
//   autotune  kernels+schedules -> schedules              max_autotune: the fastest candidates
//   emit      kernels+schedules -> LoadedCode             an object from the on-disk cache or
//                                                         the Target, loaded
//   plan      all of the above  -> runtime Plan           steps, slots, memory plan
//
// Each stage's output can be printed by name (kiln dump --stage, KILN_DUMP_DIR, KILN_LOGS)
// and is timed (KILN_LOGS=lower). When the target cannot compile the kernels, the graph runs
// on the interpreter plan instead, and CompiledGraph::fallback says why.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/autotune.h"
#include "codegen/graph_choices.h"
#include "codegen/schedule.h"
#include "ir/graph.h"
#include "passes/layout.h"
#include "runtime/attention.h"
#include "runtime/error.h"
#include "runtime/plan.h"

namespace kiln::passes {
struct FusionResult;
}

namespace kiln::codegen {

class Target;

/// The stages whose output has a text form, in pipeline order.
enum class Stage : uint8_t {
  simplified, // the graph after the default pass pipeline (.kir)
  fused,      // the fusion log: library calls, merges and refusals with reasons, groups
  kernels,    // each group's loop IR, preceded by its `// schedule` line
  source,     // the target's generated code before optimisation (LLVM IR on the CPU)
  plan,       // the runtime plan's steps and its memory plan
};
std::string_view stage_name(Stage s);
/// The stage of that name (stage_name's, or "llvm" for source), or nullopt.
std::optional<Stage> parse_stage(std::string_view name);

struct LowerOptions {
  /// Run the default pass pipeline first (off: the graph as traced).
  bool simplify = true;
  /// Fuse and generate kernels (off: the interpreter plan, every node an eager call).
  bool generate_code = true;
  /// Fixed schedule fields for every kernel (KILN_SCHEDULE, CompileOptions::schedule).
  ScheduleOverride schedule;
  /// Foreach kernels are formed (codegen/foreach.h; not under autotune).
  bool foreach = true;
  /// Set (Mode::max_autotune): the schedules are tuned (codegen/autotune.h) between the
  /// schedule and emit stages. Ignored under a schedule override, which fixes them.
  std::optional<AutotuneOptions> autotune;
  /// Where kernels are compiled for; null: this host's CPU JIT (cpu::jit_target()).
  const Target* target = nullptr;
  /// Print each pass's changes with its time (KILN_LOGS=passes).
  bool log_passes = false;
  /// The graph's fusion, already computed (kiln opt's `fuse` pass): the fuse stage takes it
  /// instead of fusing again. Its nodes are the given graph's; only without `simplify`.
  std::shared_ptr<const passes::FusionResult> fusion;
  /// Keep the kernels' object in CompiledGraph::object (`kiln aot` links it into a library).
  bool keep_object = false;
  /// A device target's plan runs its eager calls on the host instead of dispatching them to
  /// the device's eager kernels (Plan::run_on): for those eager kernels' own single-op graphs.
  bool eager_on_host = false;
  /// The last stage to run (kiln dump stops early); before `plan`, the result has no plan.
  Stage stop_after = Stage::plan;
  /// Called with the text of each stage in `print_stages` as the stage completes.
  std::function<void(Stage, const std::string&)> print;
  std::vector<Stage> print_stages;
};

/// A graph ready to run: the simplified graph, the plan that runs it, and what the plan
/// points into (the epilogues of its library calls, the loaded code of its kernels).
struct CompiledGraph {
  /// The graph after simplification; the plan's steps point at its attributes.
  std::unique_ptr<ir::Graph> graph;
  Plan plan;
  std::vector<std::unique_ptr<Epilogue>> epilogues;
  /// The attention steps' calls (runtime/attention.h).
  std::vector<std::unique_ptr<AttentionCall>> attention;
  /// Per attention site, which way it runs and the times that chose it (KILN_LOGS=attention).
  std::vector<std::string> attention_log;
  std::shared_ptr<const void> code;
  /// The code blob `code` was loaded from (Target::compile's), with LowerOptions::keep_object.
  std::string object;
  /// Kernels and library calls one run launches (view ops, which move no data, excluded).
  int64_t launches = 0;
  /// Whether the generated object came from the on-disk cache.
  bool cache_hit = false;
  /// What the autotuner did (Mode::max_autotune); its schedules are the plan's kernels'.
  AutotuneResult autotune;
  /// Which matmuls max_autotune gave a generated kernel instead of the library call, and
  /// which reductions it split.
  GemmChoices gemms;
  SplitChoices splits;
  /// Which activations the layout pass stored channels-last (conv nets), with its log.
  passes::LayoutStats layout;
  /// Why the graph runs without generated code although code generation was asked for
  /// (empty when it has its code, or was not asked).
  std::string fallback;
  /// Time of each stage that ran, in order, with a one-line summary (KILN_LOGS=lower).
  struct StageTime {
    std::string_view stage;
    double ms = 0;
    std::string summary;
  };
  std::vector<StageTime> times;

  std::vector<Tensor> run(std::span<const Tensor> inputs) const { return plan.run(inputs); }
  int64_t generated_kernels() const { return static_cast<int64_t>(plan.kernels().size()); }
  /// The stage times as one line: "simplify 0.3 ms (9 nodes), fuse ...".
  std::string times_str() const;
};

/// Lowers a graph (a traced one; the result owns it). The plan's inputs are numbered as the
/// graph's inputs, although simplification may drop some. A failure: a pass failed on it.
Expected<CompiledGraph> lower(std::unique_ptr<ir::Graph> graph, const LowerOptions& options);

} // namespace kiln::codegen
