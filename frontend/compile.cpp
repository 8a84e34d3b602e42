// CompiledFunction: the entry cache (guards → replay or re-trace), the graph cache
// (structural hash + equality → compiled graph), recompile limits, stats, logs and dumps.
#include "frontend/compile.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>

#include "codegen/cuda/cuda_target.h"
#include "codegen/lower.h"
#include "frontend/guards.h"
#include "frontend/trace.h"
#include "ir/hash.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/grad_mode.h"
#include "runtime/logs.h"
#include "runtime/ops/dispatch.h"
#include "runtime/static_plan.h"
#include "runtime/tracing.h"

namespace kiln {

std::string_view mode_name(Mode m) {
  switch (m) {
  case Mode::default_: return "default";
  case Mode::reduce_overhead: return "reduce_overhead";
  case Mode::max_autotune: return "max_autotune";
  }
  return "?";
}

Mode parse_mode(std::string_view name) {
  for (Mode m : {Mode::default_, Mode::reduce_overhead, Mode::max_autotune})
    if (name == mode_name(m)) return m;
  throw Error::without_location("unknown mode '" + std::string(name) +
                                "'; expected default, reduce_overhead or max_autotune");
}

std::string GraphBreak::str() const {
  return code + " at " + (location.empty() ? "<unknown location>" : location) + ": " + reason +
         " (hint: " + hint + ")";
}

namespace {

using codegen::CompiledGraph;
using frontend::GuardSet;
using frontend::TraceSession;

/// The stage files of every compile in this process are numbered in one sequence.
std::atomic<int> g_dump_counter{0};

struct Entry {
  GuardSet guards;
  std::shared_ptr<TraceSession::Replay> replay; // null: the call breaks, so it is re-traced
  /// reduce_overhead: the replay's plan fixed to this entry's geometry (the first replay
  /// builds it); it points into replay->compiled, which the entry holds.
  std::unique_ptr<StaticPlan> fixed;
  bool no_static_plan = false; // the plan can't be made static: it runs as a Plan
  /// Per graph input, the graph's inputs of a replay (kept so that a replay allocates none).
  std::vector<Tensor> inputs;
  /// Per tensor argument, its position among the call's arguments.
  std::vector<size_t> tensor_positions;
};

struct CachedGraph {
  std::string key; // the traced graph's structural key (compared in full on lookup)
  std::shared_ptr<const CompiledGraph> compiled;
};

std::vector<Tensor> tensor_args(std::span<const detail::CallArg> args) {
  std::vector<Tensor> t;
  for (const detail::CallArg& a : args)
    if (a.is_tensor) t.push_back(a.tensor);
  return t;
}

} // namespace

struct CompiledFunction::State {
  CompileOptions options;
  codegen::ScheduleOverride schedule; // options.schedule or $KILN_SCHEDULE, parsed
  nn::Module* module = nullptr;
  std::mutex mu;
  std::vector<Entry> entries;
  size_t hot = 0; // the entry that answered the last call
  std::map<uint64_t, std::vector<CachedGraph>> graphs;
  CompileStats stats;
  bool warned = false;

  bool wants(std::string_view artifact) const {
    return log_enabled(artifact) || log_list_has(options.logs, artifact);
  }
  std::string dump_dir() const {
    if (!options.dump_dir.empty()) return options.dump_dir;
    const char* env = std::getenv("KILN_DUMP_DIR");
    return env != nullptr ? env : "";
  }

  /// Writes one stage of compile `id` into the dump directory (`003-simplified.kir`).
  void dump(int id, std::string_view stage, const std::string& text) const {
    std::string dir = dump_dir();
    if (dir.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    char name[32];
    std::snprintf(name, sizeof name, "%03d-", id);
    const bool graph = stage == "traced" || stage == "simplified";
    std::ofstream f(std::filesystem::path(dir) /
                    (name + std::string(stage) + (graph ? ".kir" : ".txt")));
    KILN_CHECK(f.good(), "KILN_DUMP_DIR: can't write into ", dir);
    f << text;
  }

  std::shared_ptr<const CompiledGraph> compile_graph(const ir::Graph& traced) {
    std::string key = ir::structural_key(traced);
    std::vector<CachedGraph>& bucket = graphs[ir::key_hash(key)];
    for (const CachedGraph& c : bucket)
      if (c.key == key) {
        ++stats.cache_hits;
        return c.compiled;
      }
    auto start = std::chrono::steady_clock::now();
    int id = g_dump_counter.fetch_add(1);
    if (wants("graph"))
      std::cerr << "[kiln graph] traced graph " << id << ":\n" << ir::print(traced);
    const bool dumping = !dump_dir().empty();
    if (dumping) dump(id, "traced", ir::print(traced));
    // A traced graph that fails the verifier is a frontend bug, never the user's.
    if (Expected<void> ok = ir::verify(traced); !ok)
      KILN_UNREACHABLE("traced graph fails verification: " + ok.error().message() + "\n" +
                       ir::print(traced));
    using codegen::Stage;
    codegen::LowerOptions lo;
    // A graph over CUDA tensors is compiled for their device.
    auto cuda_input = std::find_if(traced.inputs().begin(), traced.inputs().end(),
                                   [](const ir::Value* v) { return v->type().device().is_cuda(); });
    const bool on_cuda = cuda_input != traced.inputs().end();
    if (on_cuda) lo.target = &codegen::cuda::cuda_target((*cuda_input)->type().device().index);
    lo.simplify = options.backend != "eager";
    lo.generate_code = options.backend == "kiln";
    lo.schedule = schedule;
    lo.foreach = options.foreach;
    lo.log_passes = wants("passes");
    if (options.mode == Mode::max_autotune && !on_cuda) { // the search times CPU kernels
      codegen::AutotuneOptions ao;
      ao.budget_ms = options.autotune_budget_ms;
      ao.log = wants("autotune");
      ao.progress = ::isatty(2) != 0;
      lo.autotune = ao;
    }
    if (dumping) lo.print_stages = {Stage::simplified, Stage::fused, Stage::kernels, Stage::plan};
    const bool log_fusion = wants("fusion");
    if (log_fusion) lo.print_stages.push_back(Stage::fused);
    std::string fusion_log;
    lo.print = [&](Stage stage, const std::string& text) {
      if (dumping) dump(id, codegen::stage_name(stage), text);
      if (log_fusion && stage == Stage::fused) fusion_log += text;
    };
    auto exe = std::make_shared<const CompiledGraph>(
        std::move(codegen::lower(traced.clone(), lo).value()));
    if (log_fusion && lo.generate_code) {
      if (exe->fallback.empty())
        fusion_log += "memory " + exe->plan.memory_plan().str() + "\n";
      else
        fusion_log +=
            "code generation failed, the graph runs on the interpreter: " + exe->fallback + "\n";
      std::cerr << "[kiln fusion] graph " << id << ":\n" << fusion_log;
    }
    if (wants("lower"))
      std::cerr << "[kiln lower] graph " << id << ": " << exe->times_str() << "\n"
                << (exe->fallback.empty()
                        ? ""
                        : "[kiln lower] graph " + std::to_string(id) +
                              " runs on the interpreter: " + exe->fallback + "\n");
    if (wants("layout"))
      for (const std::string& line : exe->layout.log)
        std::cerr << "[kiln layout] graph " << id << ": " << line << "\n";
    if (wants("attention"))
      for (const std::string& line : exe->attention_log)
        std::cerr << "[kiln attention] graph " << id << ": " << line << "\n";
    bucket.push_back({std::move(key), exe});
    ++stats.compiles;
    stats.generated_kernels += exe->generated_kernels();
    if (exe->cache_hit) ++stats.disk_cache_hits;
    stats.autotune_timings += exe->autotune.timings + exe->gemms.timings + exe->splits.timings;
    stats.autotune_database_hits +=
        exe->autotune.database_hits + exe->gemms.database_hits + exe->splits.database_hits;
    stats.autotune_splits += exe->splits.split;
    stats.autotune_gemms_generated += exe->gemms.generated;
    stats.autotune_changed += exe->autotune.changed;
    stats.channels_last_values += exe->layout.channels_last;
    stats.layout_conversions += exe->layout.conversions;
    stats.attention_steps += static_cast<int64_t>(exe->attention.size());
    if (wants("autotune") && lo.autotune)
      std::cerr << "[kiln autotune] graph " << id << ": "
                << (schedule.empty() ? exe->autotune.str()
                                     : "a schedule override is set: no search")
                << "\n";
    stats.compile_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return exe;
  }

  TraceSession::Options session_options(bool explain) const {
    TraceSession::Options o;
    o.fullgraph = options.fullgraph && !explain;
    o.log_breaks = wants("graph_breaks");
    o.keep_ir = explain;
    o.record_locations = wants("graph") || !dump_dir().empty() || explain;
    o.freeze = options.backend != "eager";
    // A module in train mode, called with grad mode on: its results get a compiled backward.
    o.backward = module != nullptr && module->is_training() && is_grad_enabled();
    o.recompute = options.recompute;
    return o;
  }

  /// Runs the user's code under tracing; with `add_entry`, caches what the trace found.
  std::vector<Tensor> trace(std::span<const detail::CallArg> args, const Body& body,
                            bool add_entry) {
    ++stats.traces;
    TraceSession session(
        session_options(false), [this](const ir::Graph& g) { return compile_graph(g); }, module);
    std::vector<Tensor> results = session.trace_call(tensor_args(args), body);
    stats.graphs = static_cast<int64_t>(session.graphs().size());
    stats.breaks = session.num_breaks();
    stats.ops = session.ops();
    stats.kernels = session.kernels();
    stats.conv_folds = session.conv_folds();
    stats.backward_needed_bytes = session.backward_memory().needed_bytes;
    stats.backward_saved_bytes = session.backward_memory().saved_bytes;
    stats.backward_recomputed_ops = session.backward_memory().recomputed_ops;
    if (!add_entry) return results;
    const TraceSession::Replay* replay = session.replay().get();
    // A call without breaks that has no replay left traced tensors in host state (an
    // optimizer's state made at its first step): the next call is traced afresh.
    if (replay == nullptr && session.num_breaks() == 0) return results;
    Entry e;
    e.guards = GuardSet::build(args, module, replay, session.host_reads(), session.mode_reads());
    e.replay = session.replay();
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].is_tensor) e.tensor_positions.push_back(i);
    if (wants("guards")) {
      std::cerr << "[kiln guards] entry " << entries.size() << ":\n";
      for (const std::string& line : e.guards.describe())
        std::cerr << "  " << line << "\n";
    }
    entries.push_back(std::move(e));
    return results;
  }

  bool static_plans() const { return options.mode != Mode::default_; }

  /// The tensor whose gradient slot `slot` is, at a call of entry e.
  static Tensor grad_slot(const frontend::GradSlotRef& slot, std::span<const detail::CallArg> args,
                          const Entry& e) {
    return slot.leaf ? Tensor(slot.leaf) : args[e.tensor_positions[slot.argument]].tensor;
  }

  /// Runs an entry's graph without the user's code. Under reduce_overhead the entry's static
  /// plan runs (built by its first replay), and nothing is allocated but the results.
  std::vector<Tensor> replay(Entry& e, std::span<const detail::CallArg> args) {
    ++stats.replays;
    // The graph's writes into parameters and optimizer state are not recorded (as the traced
    // code's were not).
    const NoGradGuard no_grad;
    const TraceSession::Replay& r = *e.replay;
    std::vector<Tensor>& inputs = e.inputs;
    inputs.resize(r.bindings.size());
    for (size_t k = 0; k < r.bindings.size(); ++k) {
      const frontend::InputBinding& b = r.bindings[k];
      switch (b.kind) {
      case frontend::InputBinding::Kind::argument:
        inputs[k] = args[e.tensor_positions[b.argument]].tensor;
        break;
      case frontend::InputBinding::Kind::captured: inputs[k] = Tensor(b.captured); break;
      case frontend::InputBinding::Kind::constant: inputs[k] = Tensor(); break;
      case frontend::InputBinding::Kind::grad:
        inputs[k] = grad_slot({b.captured, b.argument, ""}, args, e).grad();
        break;
      case frontend::InputBinding::Kind::saved:
        KILN_UNREACHABLE("a forward graph's input bound to its own output");
      }
    }
    // The gradients the call replaces without reading them are dropped before it runs, as the
    // traced code dropped them (zero_grad): the old and new ones are not held together.
    for (const frontend::TraceSession::Replay::GradWrite& w : r.grad_writes)
      if (!w.read) grad_slot(w.slot, args, e).set_grad(Tensor());
    std::vector<Tensor> outs;
    // Static plans are host plans: a device plan runs as a Plan.
    if (r.compiled && static_plans() && !e.no_static_plan && r.compiled->plan.device().is_cpu()) {
      if (e.fixed) {
        outs = e.fixed->run(inputs);
      } else {
        StaticPlan::Options so;
        so.static_outputs = options.static_outputs;
        so.time = options.profile;
        e.fixed = StaticPlan::build(r.compiled->plan, inputs, so, outs);
        e.no_static_plan = e.fixed == nullptr;
        if (e.fixed) {
          ++stats.static_plans;
          const StaticPlan::Summary& sum = e.fixed->summary();
          stats.static_plan_bytes +=
              static_cast<int64_t>(sum.arena_bytes + sum.scratch_bytes + sum.static_output_bytes);
        }
        if (wants("lower"))
          std::cerr << "[kiln lower] static plan: "
                    << (e.fixed ? e.fixed->summary().str()
                                : std::string("none (an output shares the arena)"))
                    << "\n";
      }
      stats.kernels = r.compiled->launches;
    } else if (r.compiled) {
      outs = r.compiled->run(inputs);
      stats.kernels = r.compiled->launches;
    } else {
      for (size_t k : r.forwarded)
        outs.push_back(inputs[k]);
      stats.kernels = 0;
    }
    std::vector<Tensor> results;
    results.reserve(r.result_outputs.size());
    for (size_t k = 0; k < r.result_outputs.size(); ++k) {
      if (r.result_outputs[k] >= 0) {
        results.push_back(outs[static_cast<size_t>(r.result_outputs[k])]);
      } else if (r.result_input[k] >= 0) {
        Tensor v = inputs[static_cast<size_t>(r.result_input[k])];
        for (const auto& [op, attrs] : r.result_steps[k])
          v = dispatch1(op, std::span<const Tensor>(&v, 1), attrs);
        results.push_back(std::move(v));
      } else {
        results.push_back(r.fixed[k]);
      }
      if (!r.backward && k < r.result_history.size() && r.result_history[k])
        frontend::compiled_history(results[k]);
    }
    if (r.backward) {
      std::vector<Tensor> targs;
      for (size_t pos : e.tensor_positions)
        targs.push_back(args[pos].tensor);
      frontend::compiled_backward(results, r.result_history, r.backward, outs, targs);
    }
    for (const frontend::TraceSession::Replay::GradWrite& w : r.grad_writes)
      grad_slot(w.slot, args, e)
          .set_grad(w.output >= 0 ? outs[static_cast<size_t>(w.output)] : Tensor());
    for (Tensor& t : inputs)
      t = Tensor();
    return results;
  }

  std::vector<Tensor> run_eagerly(std::span<const detail::CallArg> args, const Body& body) {
    ++stats.eager_calls;
    std::vector<Tensor> targs = tensor_args(args);
    return body(targs);
  }
};

CompiledFunction::CompiledFunction(CompileOptions options, nn::Module* module)
    : state_(std::make_unique<State>()) {
  KILN_CHECK(!options.dynamic,
             "kiln::compile: dynamic=true (symbolic shapes) is not available yet; compile "
             "once per shape with dynamic=false");
  KILN_CHECK(options.backend == "kiln" || options.backend == "interpreter" ||
                 options.backend == "eager",
             "kiln::compile: unknown backend '", options.backend,
             "'; expected kiln, interpreter or eager");
  KILN_CHECK(options.autotune_budget_ms >= 0,
             "kiln::compile: autotune_budget_ms must be >= 0, got ", options.autotune_budget_ms);
  KILN_CHECK(options.recompile_limit >= 0, "kiln::compile: recompile_limit must be >= 0, got ",
             options.recompile_limit);
  state_->schedule = codegen::parse_schedule_override(
      options.schedule.empty() ? codegen::schedule_override_env() : options.schedule);
  state_->options = std::move(options);
  state_->module = module;
}

CompiledFunction::~CompiledFunction() = default;
CompiledFunction::CompiledFunction(CompiledFunction&&) noexcept = default;
CompiledFunction& CompiledFunction::operator=(CompiledFunction&&) noexcept = default;

std::vector<Tensor> CompiledFunction::call(std::span<const detail::CallArg> args,
                                           const Body& body) {
  // Called while another compiled function traces: its ops belong to that trace.
  if (active_tracer() != nullptr) return body(tensor_args(args));
  State& s = *state_;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = s.options.profile ? Clock::now() : Clock::time_point{};
  std::lock_guard lock(s.mu);
  ++s.stats.calls;
  // The entry that answered the last call is asked first.
  const size_t n = s.entries.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t k = i == 0 ? s.hot : (i <= s.hot ? i - 1 : i);
    Entry& e = s.entries[k];
    if (!e.guards.holds(args, s.module)) continue;
    s.hot = k;
    if (!e.replay) return s.trace(args, body, /*add_entry=*/false);
    if (!s.options.profile || !e.fixed) return s.replay(e, args);
    const Clock::time_point t1 = Clock::now();
    const StaticPlan::Timings before = e.fixed->timings();
    std::vector<Tensor> out = s.replay(e, args);
    const double all = std::chrono::duration<double, std::nano>(Clock::now() - t1).count();
    const StaticPlan::Timings& after = e.fixed->timings();
    CompileStats::Profile& p = s.stats.profile;
    ++p.calls;
    p.guards_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
    p.kernels_ns += after.kernels_ns - before.kernels_ns;
    p.generated_ns += after.generated_ns - before.generated_ns;
    p.library_ns += after.library_ns - before.library_ns;
    p.eager_ns += after.eager_ns - before.eager_ns;
    p.setup_ns += all - (after.kernels_ns - before.kernels_ns);
    return out;
  }
  if (!s.entries.empty()) {
    // holds() and check() agree; the fallback text only guards against a disagreement.
    std::string why = s.entries.back()
                          .guards.check(args, s.module)
                          .value_or("a guard of the flat check (the detailed check found none)");
    if (s.stats.recompiles >= s.options.recompile_limit) {
      KILN_CHECK(!s.options.fail_on_recompile, "kiln::compile: recompile limit (",
                 s.options.recompile_limit,
                 ") reached and fail_on_recompile is set; the guard "
                 "that failed: ",
                 why);
      if (!s.warned) {
        std::cerr << "kiln: warning: a compiled function reached its recompile limit ("
                  << s.options.recompile_limit << "); calls that match no compiled entry now "
                  << "run eagerly. The guard that kept failing: " << why << "\n";
        s.warned = true;
      }
      return s.run_eagerly(args, body);
    }
    ++s.stats.recompiles;
    s.stats.recompile_reasons.push_back(why);
    if (s.wants("recompiles")) std::cerr << "[kiln recompiles] " << why << "\n";
  }
  return s.trace(args, body, /*add_entry=*/true);
}

ExplainReport CompiledFunction::explain(std::span<const detail::CallArg> args,
                                        const Body& body) const {
  State& s = *state_;
  // A scratch graph cache: explaining compiles what it traces but leaves the function's own
  // cache and stats as they were.
  State scratch;
  scratch.options = s.options;
  scratch.schedule = s.schedule;
  scratch.module = s.module;
  TraceSession session(
      scratch.session_options(true),
      [&scratch](const ir::Graph& g) { return scratch.compile_graph(g); }, s.module);
  session.trace_call(tensor_args(args), body);
  ExplainReport rep;
  for (const TraceSession::GraphInfo& g : session.graphs())
    rep.graphs.push_back({g.ops, g.inputs, g.outputs, g.ir, g.fallback, g.layout, g.attention});
  rep.breaks = session.breaks();
  rep.guards = GuardSet::build(args, s.module, session.replay().get(), session.host_reads(),
                               session.mode_reads())
                   .describe();
  return rep;
}

CompileStats CompiledFunction::stats() const {
  std::lock_guard lock(state_->mu);
  return state_->stats;
}

const CompileOptions& CompiledFunction::options() const { return state_->options; }

void CompiledFunction::reset() {
  std::lock_guard lock(state_->mu);
  state_->entries.clear();
  state_->hot = 0;
  state_->graphs.clear();
  state_->stats = {};
  state_->warned = false;
}

} // namespace kiln
