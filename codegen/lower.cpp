// The lowering pipeline, stage by stage (the list is lower() below).
#include "codegen/lower.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "codegen/attention.h"
#include "codegen/build_plan.h"
#include "codegen/cache.h"
#include "codegen/cpu/jit_target.h"
#include "codegen/cuda/cuda_target.h"
#include "codegen/foreach.h"
#include "codegen/lower_group.h"
#include "codegen/target.h"
#include "ir/kernel/verifier.h"
#include "ir/printer.h"
#include "passes/fusion.h"
#include "passes/passes.h"

namespace kiln::codegen {

std::string_view stage_name(Stage s) {
  switch (s) {
  case Stage::simplified: return "simplified";
  case Stage::fused: return "fused";
  case Stage::kernels: return "kernels";
  case Stage::source: return "source";
  case Stage::plan: return "plan";
  }
  return "?";
}

std::optional<Stage> parse_stage(std::string_view name) {
  if (name == "llvm") return Stage::source;
  for (Stage s : {Stage::simplified, Stage::fused, Stage::kernels, Stage::source, Stage::plan})
    if (name == stage_name(s)) return s;
  return std::nullopt;
}

std::string CompiledGraph::times_str() const {
  std::string s;
  for (const StageTime& t : times) {
    char ms[32];
    std::snprintf(ms, sizeof ms, " %.2f ms", t.ms);
    s += (s.empty() ? "" : "; ") + std::string(t.stage) + ms;
    if (!t.summary.empty()) s += " (" + t.summary + ")";
  }
  return s;
}

namespace {

/// Times the stages and prints the texts asked for.
class Stages {
public:
  Stages(const LowerOptions& o, CompiledGraph& out) : o_(o), out_(out) {}

  /// Runs one stage and returns what it returns; summary() then describes it for the log.
  template <typename F> auto run(std::string_view name, F&& stage) {
    const auto start = std::chrono::steady_clock::now();
    auto timed = [&] {
      out_.times.push_back(
          {name,
           std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count(),
           {}});
    };
    if constexpr (std::is_void_v<decltype(stage())>) {
      stage();
      timed();
    } else {
      auto result = stage();
      timed();
      return result;
    }
  }
  void summary(std::string s) { out_.times.back().summary = std::move(s); }

  bool printing(Stage s) const {
    return o_.print &&
           std::find(o_.print_stages.begin(), o_.print_stages.end(), s) != o_.print_stages.end();
  }
  /// Prints a stage's text when asked for; whether the pipeline stops after it.
  template <typename F> bool done(Stage s, F&& text) {
    if (printing(s)) o_.print(s, text());
    return s >= o_.stop_after;
  }

private:
  const LowerOptions& o_;
  CompiledGraph& out_;
};

std::string fused_text(const passes::LayoutStats& layout, const passes::FusionResult& fusion) {
  std::string s;
  for (const std::string& line : layout.log)
    s += line + "\n";
  for (const std::string& line : fusion.log)
    s += line + "\n";
  return s;
}

std::string kernels_text(std::span<const ir::kernel::Kernel> kernels,
                         std::span<const Schedule> schedules) {
  std::string s;
  for (size_t k = 0; k < kernels.size(); ++k)
    s += "// schedule " + schedules[k].str() + "\n" + kernels[k].str();
  return s;
}

std::string plan_text(const CompiledGraph& cg) {
  std::string s;
  const Plan& plan = cg.plan;
  for (size_t k = 0; k < plan.steps().size(); ++k) {
    const Plan::Step& st = plan.steps()[k];
    s += "step " + std::to_string(k) + ": ";
    if (st.attention) {
      s += st.attention->str();
    } else if (st.kernel >= 0) {
      const Plan::KernelCall& call = plan.kernels()[static_cast<size_t>(st.kernel)];
      s += "kernel " + std::to_string(st.kernel) + ", " + std::to_string(call.rows) + " rows";
    } else {
      s += "call " + std::string(op_name(st.op));
      if (st.epilogue) s += " + " + st.epilogue->str();
    }
    s += "\n";
  }
  if (!cg.fallback.empty()) s += "fallback: " + cg.fallback + "\n";
  return s + "memory " + plan.memory_plan().str() + "\n";
}

/// The cache key of an object: everything it depends on, in full.
std::string object_key(const Target& target, std::span<const ir::kernel::Kernel> kernels,
                       std::span<const Schedule> schedules) {
  std::string key = cache_key_header("object") + target.identity();
  for (size_t k = 0; k < kernels.size(); ++k)
    key += "schedule " + schedules[k].str() + "\n" + kernels[k].str();
  return key;
}

struct Emitted {
  Expected<LoadedCode> code;
  bool cache_hit = false;
  std::string object;
};

/// $KILN_CHECK_CUDA: an architecture ("sm_90") every compile's kernels are also compiled
/// for, as CUDA through NVRTC, never loaded; empty: none. The suite runs with it so that every
/// kernel its graphs generate is compile-tested as CUDA on machines without a GPU.
const std::string& check_cuda_arch() {
  static const std::string arch = [] {
    const char* env = std::getenv("KILN_CHECK_CUDA");
    return std::string(env != nullptr ? env : "");
  }();
  return arch;
}

/// Compiles the kernels as CUDA for check_cuda_arch(); a failure is a kiln bug.
void check_cuda(std::span<const ir::kernel::Kernel> kernels, std::span<const Schedule> schedules) {
  static const cuda::CudaTarget target(check_cuda_arch());
  Expected<std::string> blob = target.compile(kernels, schedules);
  if (!blob) KILN_UNREACHABLE("KILN_CHECK_CUDA: " + blob.error().message());
}

/// The object from the on-disk cache, or compiled by the target and stored; then loaded.
Emitted emit(const Target& target, std::span<const ir::kernel::Kernel> kernels,
             std::span<const Schedule> schedules) {
  if (!check_cuda_arch().empty() && target.name() != "cuda") check_cuda(kernels, schedules);
  const std::string key = object_key(target, kernels, schedules);
  const DiskCache& cache = DiskCache::global();
  std::optional<std::string> object = cache.load(key);
  if (object && !target.check(*object)) object.reset(); // a corrupt object is a miss
  const bool hit = object.has_value();
  if (!hit) {
    Expected<std::string> compiled = target.compile(kernels, schedules);
    if (!compiled) return {compiled.error(), false, {}};
    cache.store(key, *compiled);
    object = std::move(*compiled);
  }
  Expected<LoadedCode> code = target.load(*object, kernels);
  return {std::move(code), hit, std::move(*object)};
}

} // namespace

Expected<CompiledGraph> lower(std::unique_ptr<ir::Graph> graph, const LowerOptions& options) {
  const Target& target = options.target ? *options.target : cpu::jit_target();
  CompiledGraph out;
  Stages stages(options, out);

  // simplify: ir::Graph -> ir::Graph.
  KILN_ASSERT(!options.fusion || !options.simplify, "a given fusion of a graph to simplify");
  out.graph = std::move(graph);
  const std::vector<const ir::Value*> traced_inputs(out.graph->inputs().begin(),
                                                    out.graph->inputs().end());
  if (options.simplify) {
    Expected<void> ok = stages.run("simplify", [&] {
      passes::PassContext ctx;
      ctx.log_passes = options.log_passes;
      return passes::default_pipeline().run(*out.graph, ctx);
    });
    if (!ok) return ok.error();
    stages.summary(std::to_string(out.graph->num_nodes()) + " nodes");
  }
  std::vector<size_t> input_map; // the simplified graph's inputs among the traced ones
  for (const ir::Value* in : out.graph->inputs())
    input_map.push_back(static_cast<size_t>(
        std::find(traced_inputs.begin(), traced_inputs.end(), in) - traced_inputs.begin()));
  if (stages.done(Stage::simplified, [&] { return ir::print(*out.graph); })) return out;

  // The interpreter's plan: every node an eager call.
  auto interpreted = [&]() -> Expected<CompiledGraph> {
    stages.run("plan", [&] {
      build_interpreted_plan(out, input_map);
      if (!target.device().is_cpu()) out.plan.run_on(target.device(), {}, options.eager_on_host);
    });
    stages.done(Stage::plan, [&] { return plan_text(out); });
    return std::move(out);
  };
  if (!options.generate_code) return interpreted();

  // layout: conv nets' activations channels-last where the cost model says so (the graph's
  // types change; a given fusion already saw them).
  if (!options.fusion) {
    out.layout = stages.run("layout", [&] { return passes::assign_channels_last(*out.graph); });
    stages.summary(std::to_string(out.layout.channels_last) + " values channels-last, " +
                   std::to_string(out.layout.conversions) + " conversions");
  }

  // gemms: library or generated, per matmul shape; long rows' reductions split or not
  // (max_autotune).
  if (options.autotune && options.schedule.empty() && !options.fusion) {
    out.gemms =
        stages.run("gemms", [&] { return choose_gemms(*out.graph, target, *options.autotune); });
    out.splits =
        stages.run("splits", [&] { return choose_splits(*out.graph, target, *options.autotune); });
    stages.summary(std::to_string(out.gemms.generated) + " of " +
                   std::to_string(out.gemms.considered) + " matmuls generated, " +
                   std::to_string(out.splits.split) + " of " +
                   std::to_string(out.splits.considered) + " reductions split");
  }

  // splits (a device): long rows' reductions split so that their chunks fill the device.
  if (!target.device().is_cpu() && !options.fusion) {
    out.splits = stages.run("splits", [&] { return split_for_device(*out.graph); });
    stages.summary(std::to_string(out.splits.split) + " reductions split");
  }

  // fuse: ir::Graph -> FusionResult.
  const passes::FusionResult fusion = stages.run(
      "fuse", [&] { return options.fusion ? *options.fusion : passes::fuse(*out.graph); });
  stages.summary(std::to_string(fusion.groups.size()) + " groups, " +
                 std::to_string(fusion.library_calls.size()) + " library calls");
  if (stages.done(Stage::fused, [&] { return fused_text(out.layout, fusion); })) return out;

  // Attention sites: their softmax kernels run on blocks that stay in the caches.
  // (On a CPU: attention is not built for devices.)
  std::vector<AttentionSite> sites =
      target.device().is_cpu() ? find_attention(fusion) : std::vector<AttentionSite>{};
  std::vector<bool> in_cache(fusion.groups.size(), false);
  for (const AttentionSite& site : sites)
    in_cache[static_cast<size_t>(fusion.order[site.softmax].group)] = true;

  // lower: FusionGroup -> Kernel, each with the graph values its buffers bind; then, after
  // the groups' kernels, each attention site's softmax narrowed to the key widths its blocks
  // may stop at.
  std::vector<LoweredGroup> lowered = stages.run("lower", [&] {
    std::vector<LoweredGroup> v;
    auto verified = [&] {
      // A kernel the verifier rejects is a lowering bug, never the user's.
      if (Expected<void> ok = ir::kernel::verify(v.back().kernel); !ok)
        KILN_UNREACHABLE("lowering made an invalid kernel: " + ok.error().message() + "\n" +
                         v.back().kernel.str());
    };
    for (size_t g = 0; g < fusion.groups.size(); ++g) {
      v.push_back(lower_group(fusion.groups[g], "kiln_k" + std::to_string(g), in_cache[g]));
      verified();
    }
    for (AttentionSite& site : sites) {
      const auto g = static_cast<size_t>(fusion.order[site.softmax].group);
      for (int64_t width : narrow_widths(site)) {
        site.narrow.push_back({width, v.size()});
        v.push_back({narrow_kernel(v[g].kernel, width), v[g].buffers});
        verified();
        in_cache.push_back(true);
      }
    }
    return v;
  });
  std::vector<ir::kernel::Kernel> kernels;
  for (const LoweredGroup& lg : lowered)
    kernels.push_back(lg.kernel);

  // schedule: Kernel -> Schedule.
  std::vector<Schedule> schedules = stages.run("schedule", [&] {
    std::vector<Schedule> v;
    for (const ir::kernel::Kernel& k : kernels)
      v.push_back(choose_schedule(k, target.vector_bytes(), options.schedule));
    return v;
  });

  // autotune: kernels + schedules -> the fastest schedules (max_autotune).
  if (options.autotune && options.schedule.empty() && !kernels.empty()) {
    out.autotune = stages.run(
        "autotune", [&] { return autotune(target, kernels, schedules, *options.autotune); });
    stages.summary(out.autotune.str());
    schedules = out.autotune.schedules;
  }
  for (size_t g = 0; g < schedules.size(); ++g)
    if (in_cache[g]) schedules[g].stream = false;

  // foreach: pointwise kernels of one body that read none of each other's results (an
  // optimizer's update of each parameter) run as one kernel. Not under autotuning, which
  // measured each kernel's schedule alone.
  ForeachPlan joined;
  if (options.foreach && !options.autotune) {
    joined = stages.run("foreach", [&] {
      return form_foreach(fusion, lowered, schedules, in_cache, target.vector_bytes(),
                          options.schedule);
    });
    stages.summary(std::to_string(joined.members) + " kernels as " +
                   std::to_string(joined.kernels));
    for (size_t k = kernels.size(); k < lowered.size(); ++k) {
      kernels.push_back(lowered[k].kernel);
      in_cache.push_back(false);
      if (Expected<void> ok = ir::kernel::verify(kernels.back()); !ok)
        KILN_UNREACHABLE("a foreach kernel is invalid: " + ok.error().message() + "\n" +
                         kernels.back().str());
    }
  }
  // What is compiled: every kernel but the foreach kernels' members.
  std::vector<size_t> compiled;
  for (size_t k = 0; k < kernels.size(); ++k)
    if (joined.merged.empty() || !joined.merged[k]) compiled.push_back(k);
  std::vector<ir::kernel::Kernel> compiled_kernels;
  std::vector<Schedule> compiled_schedules;
  for (size_t k : compiled) {
    compiled_kernels.push_back(kernels[k]);
    compiled_schedules.push_back(schedules[k]);
  }
  if (stages.done(Stage::kernels,
                  [&] { return kernels_text(compiled_kernels, compiled_schedules); }))
    return out;
  if (stages.done(Stage::source,
                  [&] { return target.source(compiled_kernels, compiled_schedules); }))
    return out;

  // emit: kernels -> loaded code, from the cache or the target.
  std::vector<KernelEntry> entries(kernels.size(), nullptr);
  Device device = target.device();
  std::vector<std::pair<std::string, DeviceLaunch>> launches;
  if (!compiled_kernels.empty()) {
    Emitted emitted =
        stages.run("emit", [&] { return emit(target, compiled_kernels, compiled_schedules); });
    stages.summary(std::string(target.name()) + (emitted.cache_hit ? ", cache hit" : ", compiled"));
    if (!emitted.code) {
      // What the target cannot compile runs on the interpreter.
      out.fallback = emitted.code.error().message();
      return interpreted();
    }
    out.cache_hit = emitted.cache_hit;
    if (options.keep_object) out.object = std::move(emitted.object);
    out.code = emitted.code->library;
    for (size_t i = 0; i < compiled.size(); ++i)
      entries[compiled[i]] = emitted.code->entries.at(i);
    device = emitted.code->device;
    for (size_t k = 0; k < emitted.code->launches.size(); ++k)
      launches.emplace_back(compiled_kernels[k].name, emitted.code->launches[k]);
  }

  // plan: everything -> the runtime Plan.
  stages.run("plan", [&] {
    const std::vector<AttentionSite> attention =
        choose_attention(sites, fusion, lowered, schedules, entries, out.attention_log);
    build_fused_plan(out, input_map, fusion, lowered, schedules, entries, attention, joined.run_as);
    if (!device.is_cpu()) out.plan.run_on(device, launches, options.eager_on_host);
  });
  stages.summary(std::to_string(out.plan.steps().size()) + " steps, " +
                 out.plan.memory_plan().str());
  stages.done(Stage::plan, [&] { return plan_text(out); });
  return out;
}

} // namespace kiln::codegen
