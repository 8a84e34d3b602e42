// TraceSession: one traced call of a compiled function. It is the runtime's Tracer while the
// user's code runs: each dispatched op appends a node to the pending graph, in-place ops are
// functionalised (a new value plus, for graph inputs, a write at the graph's end), and a host
// read of pending data cuts the graph, runs it, and makes the live traced tensors concrete.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/lower.h"
#include "frontend/compile.h"
#include "ir/graph.h"
#include "runtime/call_site.h"
#include "runtime/tracing.h"

namespace kiln::frontend {

/// Where a graph input's tensor comes from when the graph runs again.
struct InputBinding {
  /// grad: the gradient its slot holds at the call, of `captured` (a leaf the code touched)
  /// or, with `captured` null, of tensor argument `argument`.
  /// saved (a compiled backward's): output `argument` of its forward graph's run.
  enum class Kind : uint8_t { argument, captured, constant, grad, saved };
  Kind kind = Kind::argument;
  size_t argument = 0;                  // index among the call's tensor arguments
  std::shared_ptr<TensorImpl> captured; // a tensor the code touched (held while cached)
  std::string name;                     // "fc1.weight" when known
};

/// The compiled backward of a compiled forward (a module compiled in train mode): the
/// backward formulas of the autograd graph the forward recorded, traced after the forward ran
/// as a graph of their own, compiled, and run by the results' grad_fn (compiled_backward).
struct BackwardGraph {
  std::shared_ptr<const codegen::CompiledGraph> compiled; // null: the graph forwards inputs
  /// argument k: the gradient of the k-th result with history; saved: a forward output;
  /// captured and constant as a forward's.
  std::vector<InputBinding> bindings;
  std::vector<TensorMeta> results; // per result with history
  std::vector<size_t> forwarded;   // without `compiled`: per output, the input it is
  std::vector<std::shared_ptr<TensorImpl>> leaf_tensors; // per leaf: a tensor it captured, or
  std::vector<size_t> leaf_arguments;                    // (when null) this tensor argument
  std::vector<int64_t> leaf_outputs;                     // per leaf: its gradient's output or -1
};

/// A gradient slot (Tensor::grad) the traced code used: of a tensor it touched (`leaf`), or
/// with `leaf` null, of tensor argument `argument`.
struct GradSlotRef {
  std::shared_ptr<TensorImpl> leaf;
  size_t argument = 0;
  std::string name;
};

/// A concrete tensor whose value the compiled graph depends on (the traced code read it on
/// the host, or it was folded into the graph at compile time): replaying is valid only while
/// its version is unchanged.
struct HostReadGuard {
  std::shared_ptr<TensorImpl> tensor;
  uint64_t version = 0;
  std::string name;
  /// How the graph depends on it, for the guard's text.
  const char* why = "read on the host";
};

/// A module whose train/eval mode the traced code read: replaying is valid only while the
/// mode is unchanged (held by the flag, which outlives the module if need be).
struct ModeReadGuard {
  std::shared_ptr<const bool> flag;
  bool training = false;
  std::string name;
};

/// Compiles (or finds) the compiled graph of a traced graph; supplied by CompiledFunction.
using CompileGraphFn =
    std::function<std::shared_ptr<const codegen::CompiledGraph>(const ir::Graph& traced)>;

class TraceSession final : public Tracer {
public:
  struct Options {
    bool fullgraph = false;
    bool log_breaks = false;
    bool keep_ir = false;          // keep each graph's text (explain)
    bool record_locations = false; // give nodes the user's file:line (logs and dumps)
    bool freeze = false;           // fold eval-mode batch norms into convs (freeze.h)
    /// Results with autograd history get a compiled backward (a module in train mode).
    bool backward = false;
    /// The forward keeps for that backward what a min-cut partition says, and the backward
    /// computes the rest again (passes/partition.h); off: what the formulas save.
    bool recompute = true;
  };

  TraceSession(Options options, CompileGraphFn compile, nn::Module* module);
  ~TraceSession() override;

  /// The whole traced call: begin, `body` on the stand-ins with this tracer active, finish.
  /// Returns the (concrete) results.
  std::vector<Tensor> trace_call(std::span<const Tensor> args, const CompiledFunction::Body& body);

  // Tracer
  std::vector<Tensor> record(Op op, std::span<const Tensor> inputs, const Attrs& attrs,
                             std::span<Tensor> out) override;
  void host_read(const Tensor* t, HostRead why) override;
  void module_mode_read(const nn::Module& m, const std::shared_ptr<const bool>& flag) override;
  void grad_slot(const Tensor& t, bool write) override;
  void track(const std::shared_ptr<TensorImpl>& impl) override;
  uint64_t version(const TensorImpl& t) override;
  bool aliases(const TensorImpl& a, const TensorImpl& b) override;
  int64_t segment_id() override;

  // What the trace found (valid after finish).
  /// The breaks, with their locations (symbolised on the first call).
  const std::vector<GraphBreak>& breaks() const;
  int64_t num_breaks() const { return static_cast<int64_t>(breaks_.size()); }
  struct GraphInfo {
    int64_t ops = 0, inputs = 0, outputs = 0;
    std::string ir;
    std::string fallback;               // why the graph runs without generated code (CompiledGraph)
    std::vector<std::string> layout;    // the layout pass's line per conv region (passes/layout.h)
    std::vector<std::string> attention; // a line per attention site (codegen/attention.h)
  };
  const std::vector<GraphInfo>& graphs() const { return graphs_; }
  int64_t ops() const { return ops_; }
  int64_t kernels() const { return kernels_; }
  /// Batch norms (per-channel affine chains) folded into convolutions (freeze.h).
  int64_t conv_folds() const { return conv_folds_; }
  /// The compiled backward's partition: bytes its formulas save, bytes the forward keeps,
  /// and the forward ops the backward computes again.
  struct BackwardMemory {
    int64_t needed_bytes = 0, saved_bytes = 0, recomputed_ops = 0;
  };
  const BackwardMemory& backward_memory() const { return backward_memory_; }
  const std::vector<HostReadGuard>& host_reads() const { return host_reads_; }
  const std::vector<ModeReadGuard>& mode_reads() const { return mode_reads_; }

  /// For a call without breaks: everything needed to run it again without the user's code.
  struct Replay {
    /// A gradient slot read before the code wrote it: a replay binds what it holds, so it must
    /// hold a tensor of this kind, or none (a guard).
    struct GradRead {
      GradSlotRef slot;
      bool defined = false;
      TensorMeta meta;
    };
    /// A gradient slot the code wrote: after a replay it holds graph output `output` (-1:
    /// none), as after the traced call.
    struct GradWrite {
      GradSlotRef slot;
      int64_t output = -1;
      /// Its old value is a graph input (Kind::grad): the slot keeps it while the run reads
      /// it. Otherwise a replay drops it first, as the traced code did.
      bool read = false;
    };
    std::vector<GradRead> grad_reads;
    std::vector<GradWrite> grad_writes;
    /// Per result: it had autograd history when traced (it gets compiled_backward() when
    /// `backward` is set, else compiled_history()).
    std::vector<bool> result_history;
    std::shared_ptr<const BackwardGraph> backward;
    std::shared_ptr<const codegen::CompiledGraph> compiled;
    std::vector<InputBinding> bindings;
    /// Per result: the graph output it is, or -1 with `fixed[k]` the tensor it always is.
    std::vector<int64_t> result_outputs;
    std::vector<Tensor> fixed;
    /// Per result: when >= 0, the result is a view (steps) of that graph input, taken after
    /// the writes (a tensor the graph wrote in place, returned as eager code returns it).
    std::vector<int64_t> result_input;
    std::vector<std::vector<std::pair<Op, Attrs>>> result_steps;
    /// Without a compiled graph (a graph with no nodes): the input each output forwards.
    std::vector<size_t> forwarded;
  };
  /// Set by finish when the call had no breaks.
  const std::shared_ptr<Replay>& replay() const { return replay_; }

  struct Base;
  struct Handle;

private:
  struct Segment;
  /// A gradient slot the traced code read or wrote.
  struct GradSlot {
    GradSlotRef ref;
    std::shared_ptr<TensorImpl> initial; // what it held when the code first used it
    std::shared_ptr<TensorImpl> last;    // an argument's: what it held when the code returned
    bool read_first = false;             // read before any write
    bool written = false;
    /// The value it held was captured (a graph input bound from the slot), not only looked
    /// at (zero_grad's defined() test).
    bool bound = false;
  };
  GradSlot* slot_of(const Tensor& t);
  /// Strips the autograd history recorded while tracing from the results (its saved
  /// tensors are the trace's); each result that had one gets compiled_history() instead.
  void strip_history(std::vector<Tensor>& results);
  /// The leaves and saved tensors of the autograd graph the results' history recorded in
  /// this trace; false when it reaches history from before the trace.
  bool history_of(const std::vector<Tensor>& results, const std::vector<bool>& history,
                  std::vector<std::shared_ptr<TensorImpl>>& leaves,
                  std::unordered_set<const TensorImpl*>& saved);
  /// Traces and compiles (without running) the backward of the results' history in a segment
  /// of its own; null when it can't be (a gradient that is not a value of that graph).
  std::shared_ptr<BackwardGraph>
  trace_backward(const std::vector<Tensor>& results, const std::vector<bool>& history,
                 const std::vector<std::shared_ptr<TensorImpl>>& leaves);
  /// Starts the trace: the traced stand-ins for the call's tensor arguments.
  std::vector<Tensor> begin(std::span<const Tensor> args);
  /// Ends it: runs the last graph with `results` among its outputs; results become concrete.
  void finish(std::vector<Tensor>& results);
  Segment& segment();
  /// The handle of a tensor traced into the pending graph, or null for a concrete tensor; a
  /// tensor traced by another call (or kept from an earlier one) is an error.
  Handle* handle_of(const TensorImpl& impl);
  ir::Value* value_of(const Tensor& t);
  ir::Value* current(Handle& h);
  std::shared_ptr<Base> origin(const Tensor& t, std::vector<std::pair<Op, Attrs>>* steps);
  std::shared_ptr<Base> capture(const Tensor& t);
  Tensor make_traced(ir::Value* v, std::shared_ptr<Base> base,
                     std::vector<std::pair<Op, Attrs>> steps);
  void write(Op op, Tensor& self, ir::Value* result);
  ir::Value* merge(Base& base, const std::vector<std::pair<Op, Attrs>>& steps, ir::Value* r);
  ir::Value* emit(Op op, std::vector<ir::Value*> inputs, Attrs attrs);
  /// Runs the pending graph; `results` (may be null) are among its outputs.
  void cut(std::vector<Tensor>* results);
  bool pending(const TensorImpl& impl);

  Options options_;
  CompileGraphFn compile_;
  uint64_t id_;
  std::unordered_map<const TensorImpl*, std::string> names_;
  std::unique_ptr<Segment> seg_;
  int64_t next_segment_ = 0;
  mutable std::vector<GraphBreak> breaks_;
  mutable std::vector<CallStack> break_stacks_; // not yet symbolised
  std::vector<GraphInfo> graphs_;
  std::vector<HostReadGuard> host_reads_;
  std::vector<ModeReadGuard> mode_reads_;
  std::unordered_map<const nn::Module*, std::string> module_names_;
  int64_t ops_ = 0;
  int64_t kernels_ = 0;
  int64_t conv_folds_ = 0;
  size_t num_args_ = 0;
  std::vector<Tensor> args_;                               // the call's tensor arguments
  std::unordered_map<const TensorImpl*, size_t> standins_; // argument stand-in → its index
  std::vector<GradSlot> grad_slots_;
  std::unordered_map<const TensorImpl*, size_t> slot_index_;  // leaf or stand-in → slot
  std::unordered_map<const TensorImpl*, size_t> grad_values_; // a concrete gradient → its slot
  std::shared_ptr<Replay> replay_;
  uint64_t first_node_ = 0; // autograd's sequence when the trace began
  /// While the last cut of a call with a compiled backward runs: the saved tensors (graph
  /// outputs the backward reads), whether each became one, and the forward's outputs.
  const std::unordered_set<const TensorImpl*>* saved_ = nullptr;
  bool saved_ok_ = true;
  std::vector<Tensor> forward_outs_;
  /// The forward ops the compiled backward computes again (the partition's), replayed in its
  /// segment before the formulas: each operand is an earlier step's result or a concrete
  /// tensor (a forward output, a parameter, a constant). `targets`: the saved tensors each
  /// step gives back, which the formulas then read as values of the backward's graph.
  struct Recompute {
    struct Operand {
      int64_t step = -1;   // >= 0: that step's result
      int64_t output = -1; // >= 0: the forward's output (resolved into `tensor` after its run)
      Tensor tensor;
    };
    struct Step {
      Op op;
      Attrs attrs;
      std::vector<Operand> operands;
    };
    std::vector<Step> steps;
    std::vector<std::pair<std::shared_ptr<TensorImpl>, size_t>> targets;
  };
  Recompute recompute_;
  BackwardMemory backward_memory_;
  /// In a cut with a compiled backward: partitions the saved tensors (passes/partition.h),
  /// fills recompute_, and returns the saved tensors the backward computes again (the others
  /// become forward outputs, numbered in `out_index` as cut numbers the graph's outputs).
  std::unordered_set<const TensorImpl*>
  partition_saved(Segment& s, std::unordered_map<ir::Value*, int64_t>& out_index);
};

/// Gives a result of a compiled function that had autograd history when traced a node that
/// says, when backward reaches it, that gradients through a compiled forward are not built.
void compiled_history(Tensor& result);

/// Gives the results of a compiled forward that had history (`history`) one grad_fn that runs
/// `backward` on the saved forward outputs (`outputs`); gradients flow on to the leaves it
/// captured and the call's tensor arguments.
void compiled_backward(std::vector<Tensor>& results, const std::vector<bool>& history,
                       const std::shared_ptr<const BackwardGraph>& backward,
                       std::span<const Tensor> outputs, std::span<const Tensor> args);

/// The break code for a host-read cause.
const BreakCode& break_code(HostRead why);

} // namespace kiln::frontend
