// kiln::compile: wraps a function or module so that its tensor ops are traced into graphs,
// cut at graph breaks, guarded, cached, and replayed (docs/user-guide.md, "Compiling").
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/function_ref.h"
#include "runtime/nn/module.h"
#include "runtime/scalar.h"
#include "runtime/tensor.h"

namespace kiln {

enum class Mode : uint8_t { default_, reduce_overhead, max_autotune };
std::string_view mode_name(Mode m);
/// "default", "reduce_overhead" or "max_autotune"; anything else is an error.
Mode parse_mode(std::string_view name);

struct CompileOptions {
  /// default: each replay runs the graph's plan, allocating its buffers per call.
  /// reduce_overhead: each compiled entry gets a static plan on its first replay (one arena
  /// allocated once, argument blocks and library calls prepared, inputs patched in place), so
  /// a replay allocates nothing but its outputs; the guards of an entry are flat arrays.
  /// max_autotune: reduce_overhead, plus schedules chosen by timing candidates.
  Mode mode = Mode::default_;
  /// A graph break is a kiln::Error carrying the break's report.
  bool fullgraph = false;
  /// Symbolic sizes instead of one compile per shape (not built yet: an error when set).
  bool dynamic = false;
  /// "kiln" (passes + code generation), "interpreter" (passes, then each node on the eager
  /// kernels) or "eager" (the traced graph as recorded, on the eager kernels).
  std::string backend = "kiln";
  /// Guard failures that may each add a compiled entry; past it the function runs eagerly.
  int recompile_limit = 8;
  /// Past the recompile limit, throw instead of running eagerly.
  bool fail_on_recompile = false;
  /// Extra KILN_LOGS artifacts for this function ("graph_breaks,guards").
  std::string logs;
  /// Writes every stage of every compile here (as KILN_DUMP_DIR does).
  std::string dump_dir;
  /// Fixes schedule fields of every generated kernel: "lanes=8,threads=1,grain=1" (f32 vector
  /// lanes, threads per kernel, rows per parallel chunk). Empty: $KILN_SCHEDULE, else the
  /// heuristic's. Tests use it to run every vector width and thread count on one host.
  std::string schedule;
  /// reduce_overhead and max_autotune: a replay's outputs are views into buffers of its
  /// compiled entry that the next call of that entry overwrites (as torch.compile documents
  /// for its CUDA-graph outputs), so a replay allocates nothing; clone() an output to keep it.
  bool static_outputs = false;
  /// Time the parts of every replay of a static plan (CompileStats::profile); kiln bench does.
  bool profile = false;
  /// A module compiled in train mode: its forward keeps for the compiled backward what a
  /// min-cut partition says, and the backward computes cheap pointwise values again from
  /// it (AOTAutograd's rematerialization). false: it keeps what the formulas save.
  bool recompute = true;
  /// Pointwise kernels of one body that read none of each other's results (an optimizer's
  /// update of each parameter) run as one foreach kernel (docs/ir.md). Not under
  /// max_autotune, which tunes each kernel alone.
  bool foreach = true;
  /// max_autotune: the time one graph's schedule search may take (compiling and timing its
  /// candidates); kernels left when it runs out keep the heuristic's schedules. The search's
  /// results are kept in the on-disk cache, so a later compile of the same kernels, in any
  /// process, times nothing.
  double autotune_budget_ms = 60000;
};

/// One graph break: where tracing had to stop because the host needed tensor data.
struct GraphBreak {
  std::string code;     // "KB001"; docs/graph-breaks.md lists each
  std::string reason;   // "Tensor::item() reads a tensor's value on the host"
  std::string location; // the user's "file:line" (or function name without debug info)
  std::string hint;     // how to avoid it
  /// The graph the break ended (0-based, in call order).
  int64_t graph = 0;
  std::string str() const; // "KB001 at model.cpp:12: reason (hint: ...)"
};

/// Counters of one compiled function (docs/user-guide.md, "Compiling").
struct CompileStats {
  int64_t calls = 0;
  int64_t traces = 0;     // runs of the user's code under tracing
  int64_t replays = 0;    // calls answered without running the user's code
  int64_t compiles = 0;   // graphs compiled (cache misses)
  int64_t recompiles = 0; // traces caused by a failed guard
  std::vector<std::string> recompile_reasons;
  int64_t cache_hits = 0;  // graphs found already compiled (by structure)
  int64_t graphs = 0;      // graphs per call, last trace
  int64_t breaks = 0;      // graph breaks per call, last trace
  int64_t ops = 0;         // IR nodes captured per call, last trace
  int64_t kernels = 0;     // kernels and library calls launched per call, last call
  int64_t eager_calls = 0; // calls run eagerly past the recompile limit
  int64_t conv_folds = 0;  // eval batch norms (per-channel affines) folded into convs, last trace
  double compile_ms = 0;   // total time spent compiling graphs
  int64_t generated_kernels = 0; // kernels generated by the LLVM backend, over all graphs
  int64_t disk_cache_hits = 0;   // compiles whose object code came from the on-disk cache
  int64_t static_plans = 0;      // entries given a static plan (reduce_overhead, max_autotune)
  /// Bytes the static plans hold between calls: their arenas, scratch and static outputs.
  int64_t static_plan_bytes = 0;
  int64_t autotune_timings = 0;       // max_autotune: schedule candidates timed
  int64_t autotune_database_hits = 0; // max_autotune: kernels whose schedule the database gave
  int64_t autotune_changed = 0; // max_autotune: kernels given another schedule than the heuristic's
  int64_t autotune_gemms_generated = 0; // max_autotune: matmuls given a generated kernel
  int64_t autotune_splits = 0;          // max_autotune: reductions over long rows split into chunks
  int64_t channels_last_values = 0; // activations the layout pass stored channels-last, all graphs
  int64_t layout_conversions = 0;   // copies it inserted at the channels-last regions' edges
  int64_t attention_steps = 0;      // attention sites run as one step, block by block
  /// A module compiled in train mode, last trace: bytes its backward formulas save, bytes
  /// the forward keeps for the compiled backward, and the forward ops the backward computes
  /// again instead (CompileOptions::recompute).
  int64_t backward_needed_bytes = 0;
  int64_t backward_saved_bytes = 0;
  int64_t backward_recomputed_ops = 0;
  /// With CompileOptions::profile: where the replays of static plans spent their time, in
  /// nanoseconds summed over `calls` (guards: finding the entry; setup: binding inputs,
  /// argument blocks, outputs and results; kernels: inside generated kernels, library calls
  /// and eager calls).
  struct Profile {
    int64_t calls = 0;
    double guards_ns = 0, setup_ns = 0, kernels_ns = 0;
    /// kernels_ns by kind: generated kernels, library calls (oneDNN), eager calls.
    double generated_ns = 0, library_ns = 0, eager_ns = 0;
  };
  Profile profile;
};

/// What kiln::explain found: the graphs a call produces, each break and each guard.
struct ExplainReport {
  struct Graph {
    int64_t ops = 0;
    int64_t inputs = 0;
    int64_t outputs = 0;
    std::string ir; // the traced graph in .kir text
    /// Why the graph runs without generated code (the target could not compile its
    /// kernels); empty when it has its code.
    std::string fallback;
    /// The layout pass's choice for each conv region of the graph, one line each
    /// ("layout: region of %4 conv2d (2 convs, 3 values): channels-last, ..."); empty
    /// without conv regions.
    std::vector<std::string> layout;
    /// Each attention site of the graph, one line: whether it runs as one step block by
    /// block or as three steps, and the times that decided it (KILN_LOGS=attention's lines).
    std::vector<std::string> attention;
  };
  std::vector<Graph> graphs;
  std::vector<GraphBreak> breaks;
  std::vector<std::string> guards;
  int64_t graph_count() const { return static_cast<int64_t>(graphs.size()); }
  int64_t break_count() const { return static_cast<int64_t>(breaks.size()); }
  /// The report as JSON (schema: docs/graph-breaks.md, "JSON report").
  std::string to_json() const;
  /// Reads to_json's output back.
  static ExplainReport from_json(std::string_view json);
  std::string str() const;
};
std::ostream& operator<<(std::ostream& os, const ExplainReport& r);

/// The list of break codes with their reason and hint (docs/graph-breaks.md mirrors it).
struct BreakCode {
  std::string_view code;
  std::string_view name;
  std::string_view reason;
  std::string_view hint;
};
std::span<const BreakCode> break_codes();

namespace detail {

/// A call argument as the frontend sees it: a tensor, or a scalar guarded by value.
struct CallArg {
  bool is_tensor = false;
  Tensor tensor;
  Scalar scalar = Scalar(0);
};

template <typename T> CallArg to_call_arg(const T& v) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, Tensor>) {
    return CallArg{true, v, Scalar(0)};
  } else {
    static_assert(std::is_arithmetic_v<D>,
                  "kiln::compile: arguments must be Tensors or arithmetic scalars");
    return CallArg{false, Tensor(), Scalar(v)};
  }
}

template <typename T> inline constexpr bool is_tensor_v = std::is_same_v<std::decay_t<T>, Tensor>;

/// Flattens a compiled function's result into tensors and builds it back.
template <typename R> struct Results {
  static_assert(sizeof(R) == 0, "kiln::compile: a compiled function must return Tensor, "
                                "std::vector<Tensor>, a std::tuple/std::pair of Tensors, or void");
};
template <> struct Results<Tensor> {
  static std::vector<Tensor> flatten(Tensor t) { return {std::move(t)}; }
  static Tensor unflatten(std::vector<Tensor> v) { return std::move(v.at(0)); }
};
template <> struct Results<std::vector<Tensor>> {
  static std::vector<Tensor> flatten(std::vector<Tensor> v) { return v; }
  static std::vector<Tensor> unflatten(std::vector<Tensor> v) { return v; }
};
template <typename... Ts> struct Results<std::tuple<Ts...>> {
  static_assert((is_tensor_v<Ts> && ...), "kiln::compile: tuple results must hold Tensors");
  static std::vector<Tensor> flatten(std::tuple<Ts...> t) {
    return std::apply([](auto&... x) { return std::vector<Tensor>{x...}; }, t);
  }
  static std::tuple<Ts...> unflatten(std::vector<Tensor> v) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return std::tuple<Ts...>{std::move(v.at(I))...};
    }
    (std::index_sequence_for<Ts...>{});
  }
};
template <> struct Results<std::pair<Tensor, Tensor>> {
  static std::vector<Tensor> flatten(std::pair<Tensor, Tensor> p) { return {p.first, p.second}; }
  static std::pair<Tensor, Tensor> unflatten(std::vector<Tensor> v) {
    return {std::move(v.at(0)), std::move(v.at(1))};
  }
};

/// For each argument position, its index among the tensor arguments.
template <typename... Args> constexpr std::array<size_t, sizeof...(Args)> tensor_slots() {
  std::array<size_t, sizeof...(Args)> slots{};
  size_t k = 0, i = 0;
  ((slots[i++] = is_tensor_v<Args> ? k++ : 0), ...);
  return slots;
}

/// Calls f with each tensor argument replaced by the matching one of `tensors`.
template <typename F, typename... Args>
decltype(auto) invoke_replacing(F& f, std::span<const Tensor> tensors, Args&&... args) {
  constexpr auto slots = tensor_slots<Args...>();
  return [&]<size_t... I>(std::index_sequence<I...>)->decltype(auto) {
    auto pick = [&]<size_t J>(auto&& a) -> decltype(auto) {
      if constexpr (is_tensor_v<decltype(a)>)
        return static_cast<const Tensor&>(tensors[slots[J]]);
      else
        return std::forward<decltype(a)>(a);
    };
    return f(pick.template operator()<I>(std::forward<Args>(args))...);
  }
  (std::index_sequence_for<Args...>{});
}

} // namespace detail

/// The type-independent part of a compiled function: tracing, guards, the graph cache,
/// replay and stats. Compiled<F> gives it the user's signature.
class CompiledFunction {
public:
  /// Runs the user's code on the given tensors (traced ones while tracing) and returns its
  /// results flattened. Referenced for the call only (no allocation).
  using Body = FunctionRef<std::vector<Tensor>(std::span<const Tensor> tensors)>;

  CompiledFunction(CompileOptions options, nn::Module* module);
  ~CompiledFunction();
  CompiledFunction(CompiledFunction&&) noexcept;
  CompiledFunction& operator=(CompiledFunction&&) noexcept;

  std::vector<Tensor> call(std::span<const detail::CallArg> args, const Body& body);
  /// Traces one call (running its graphs) and reports graphs, breaks and guards; the cache
  /// and stats are left alone.
  ExplainReport explain(std::span<const detail::CallArg> args, const Body& body) const;
  CompileStats stats() const;
  const CompileOptions& options() const;
  /// Drops every compiled entry and the stats.
  void reset();

private:
  struct State;
  std::unique_ptr<State> state_;
};

/// A compiled callable with F's signature.
template <typename F> class Compiled {
public:
  Compiled(F f, CompileOptions options, nn::Module* module = nullptr)
      : f_(std::move(f)), core_(std::move(options), module) {}

  template <typename... Args> auto operator()(Args&&... args) {
    using R = std::decay_t<decltype(detail::invoke_replacing(f_, {}, std::forward<Args>(args)...))>;
    std::array<detail::CallArg, sizeof...(Args)> call_args{detail::to_call_arg(args)...};
    auto body = [&](std::span<const Tensor> tensors) {
      if constexpr (std::is_void_v<R>) {
        detail::invoke_replacing(f_, tensors, args...);
        return std::vector<Tensor>{};
      } else {
        return detail::Results<R>::flatten(detail::invoke_replacing(f_, tensors, args...));
      }
    };
    std::vector<Tensor> out = core_.call(call_args, body);
    if constexpr (!std::is_void_v<R>) return detail::Results<R>::unflatten(std::move(out));
  }

  template <typename... Args> ExplainReport explain(Args&&... args) const {
    std::array<detail::CallArg, sizeof...(Args)> call_args{detail::to_call_arg(args)...};
    auto body = [&](std::span<const Tensor> tensors) {
      using R = std::decay_t<decltype(detail::invoke_replacing(f_, tensors,
                                                               std::forward<Args>(args)...))>;
      if constexpr (std::is_void_v<R>) {
        detail::invoke_replacing(f_, tensors, args...);
        return std::vector<Tensor>{};
      } else {
        return detail::Results<R>::flatten(detail::invoke_replacing(f_, tensors, args...));
      }
    };
    return core_.explain(call_args, body);
  }

  CompileStats stats() const { return core_.stats(); }
  const CompileOptions& options() const { return core_.options(); }
  void reset() { core_.reset(); }

private:
  mutable F f_;
  CompiledFunction core_;
};

/// Compiles a module's forward. The module is held by reference: it must outlive the result.
/// Its train/eval mode and the identity of its parameters and buffers are guarded.
template <typename M>
requires std::derived_from<M, nn::Module>
auto compile(M& module, CompileOptions options = {}) {
  auto fwd = [m = &module](auto&&... a) { return m->forward(std::forward<decltype(a)>(a)...); };
  return Compiled<decltype(fwd)>(std::move(fwd), std::move(options), &module);
}

/// Compiles a callable (lambda, function pointer, functor).
template <typename F>
requires(!std::derived_from<std::decay_t<F>, nn::Module>) auto compile(
    F&& fn, CompileOptions options = {}) {
  return Compiled<std::decay_t<F>>(std::forward<F>(fn), std::move(options));
}

template <typename T> struct is_compiled : std::false_type {};
template <typename F> struct is_compiled<Compiled<F>> : std::true_type {};

/// Traces one call of fn (a compiled function, a module, or any callable) and reports its
/// graphs, breaks and guards. Its graphs run, so arguments written in place are written.
template <typename F, typename... Args> ExplainReport explain(F&& fn, Args&&... args) {
  if constexpr (is_compiled<std::decay_t<F>>::value) {
    return fn.explain(std::forward<Args>(args)...);
  } else {
    auto c = compile(fn);
    return c.explain(std::forward<Args>(args)...);
  }
}

} // namespace kiln
