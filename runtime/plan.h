// Plan: what one run of a compiled graph does, in order, as the runtime executes it. Values
// live in numbered slots: constants and inputs are bound first; each step reads slots and
// defines slots (a generated kernel runs its rows on the thread pool; an eager call
// dispatches an op, which is also how library calls such as oneDNN matmul and ops with no
// lowering run); slots are released after their last read; the in-place writes land last.
//
// Memory plan (codegen/memory_plan, set_memory): the results of generated kernels and library calls
// that the caller never sees live in one arena per run, at offsets chosen over the whole plan: a
// buffer's lifetime runs from the step that defines it to the last read of it or of any view of it,
// and buffers whose lifetimes do not meet share bytes (placed largest first at the lowest
// offset free for their lifetime). A kernel result may take the very bytes of an operand
// that dies at that step, when the kernel allows it (Step::may_reuse). The lowering builds a
// Plan from a graph (codegen/build_plan) and plans its memory; nothing here knows the IR.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/epilogue.h"
#include "runtime/ops/op.h"
#include "runtime/tensor.h"

namespace kiln {

class AttentionCall;

/// A generated kernel's entry: buffers (inputs, then outputs, in the kernel's order) and the
/// half-open range of rows to run.
using KernelEntry = void (*)(char* const* buffers, int64_t row_begin, int64_t row_end);

/// A kernel's launch on a device (a CUDA kernel over all its points), queued on the device:
/// its buffers' device pointers, inputs then outputs in the kernel's order.
using DeviceLaunch = std::function<void(char* const* buffers)>;

/// A fresh tensor of these sizes and dense strides (empty: contiguous), uninitialised: the
/// results the plan and library epilogues allocate in a chosen layout. Not traced.
Tensor empty_with_layout(IntList sizes, IntList strides, DType dtype,
                         Device device = Device::cpu());

/// Bytes as "1.25 MiB", for logs and summaries.
std::string mib_str(size_t bytes);

class Plan {
public:
  struct KernelCall {
    KernelEntry entry = nullptr;
    std::string name;  // the kernel's symbol (a saved plan names its kernels by it)
    int64_t rows = 0;  // rows of the kernel's iteration space
    int64_t grain = 1; // rows per parallel chunk; at most `grain` rows run on the caller
    int threads = 0;   // threads the rows may run on; 0: the pool's
    struct Output {
      std::vector<int64_t> sizes;
      DType dtype = DType::f32;
      std::vector<int64_t> strides = {}; // a dense layout; empty: contiguous
    };
    std::vector<Output> outputs;
    /// Set: the kernel runs on the plan's device, launched over all its rows (run_on).
    DeviceLaunch launch;
    /// Runs the rows on these buffers: on the device when it has a launch; else on the
    /// calling thread when they fit in one grain (or inside a parallel region), else in
    /// chunks on the pool.
    void run(char* const* buffers) const;
  };
  struct Step {
    int kernel = -1; // >= 0: kernels()[kernel]; otherwise an eager call of op with attrs
    Op op = Op::copy;
    const Attrs* attrs = nullptr; // owned by whoever built the plan; outlives it
    /// Set: op is a library contraction run with this epilogue (run_with_epilogue), owned
    /// like attrs; its one result is the epilogue's.
    const Epilogue* epilogue = nullptr;
    /// Set: the step is attention run block by block (runtime/attention.h), owned like
    /// attrs; its one result is attention->out's. Its softmax kernel is one of kernels().
    const AttentionCall* attention = nullptr;
    std::vector<size_t> operands; // slots
    std::vector<size_t> results;  // slots
    std::vector<size_t> release;  // slots whose last read is this step
    /// (result, operand) pairs of a generated kernel: the result may take the operand's
    /// buffer when the operand dies here (ir::kernel::Kernel::may_write_over).
    std::vector<std::pair<size_t, size_t>> may_reuse;
  };
  /// What the memory plan decided (set_memory).
  struct MemoryPlan {
    size_t arena_bytes = 0;   // one block per run
    size_t planned_bytes = 0; // the planned buffers' sum: what they take without reuse
    size_t buffers = 0;       // results placed in the arena
    size_t in_place = 0;      // of them, results written over a dying operand
    std::string str() const;
  };
  struct Write {
    size_t target = 0, source = 0; // slots: copy source into target when the run ends
  };
  /// Writes computed in place (set_in_place_writes): the generated kernel that makes a
  /// write's source writes it straight into the target input's buffer, when that input has
  /// the result's layout at the run. Nothing reads the target after that kernel, and the
  /// kernel reads it only element by element where it writes (Kernel::may_write_over), so
  /// the graph's values are unchanged; the write at the end then has nothing to copy. An
  /// optimizer's update of its parameters and state needs no second copy of them this way.
  void set_in_place_writes(std::vector<std::pair<size_t, size_t>> source_target);
  std::span<const std::pair<size_t, size_t>> in_place_writes() const { return in_place_; }
  /// The input slot a kernel result is computed into (set_in_place_writes), or -1. It is, on
  /// a run, when that input can hold the result (holds_result).
  int64_t in_place_target(size_t result) const {
    return into_input_.empty() ? -1 : into_input_.at(result);
  }
  /// Whether t can hold a kernel result of these sizes, strides (dense; empty: contiguous)
  /// and dtype: a contiguous tensor of them.
  static bool holds_result(const Tensor& t, IntList sizes, IntList strides, DType dtype);

  /// Slot s holds `value` in every run.
  void bind_constant(size_t slot, Tensor value);
  /// Slot s holds the caller's input #index.
  void bind_input(size_t slot, size_t index);
  /// Appends a generated kernel (referenced by Step::kernel); returns its number.
  int add_kernel(KernelCall call);
  void add_step(Step step);
  void add_output(size_t slot) { outputs_.push_back(slot); }
  void add_write(size_t target, size_t source) { writes_.push_back({target, source}); }
  /// After the last step is added: each slot that is not an output or a write's target or
  /// source is released by the step that reads it last. Until set_memory, every result is
  /// allocated as its step runs.
  void finish(size_t num_slots);
  /// Where a result lives: planned ones in the run's arena, at an offset.
  struct Placement {
    bool planned = false;
    size_t offset = 0, nbytes = 0; // bytes
    Shape sizes, strides;          // strides: dense; empty: contiguous
    DType dtype = DType::f32;
  };
  /// Takes a memory plan (codegen::plan_memory): a placement per slot.
  void set_memory(std::vector<Placement> placement, MemoryPlan summary);
  /// Makes the plan run on `device` (once built): every kernel gets its launch there, by its
  /// name, the constants move there, and the results and the arena are allocated there. Its
  /// inputs must be there too (CPU scalars move). Library calls run with device operands
  /// (run_with_epilogue: cuBLASLt for matmuls, the post-ops it does not fuse and what it cannot
  /// take on the device's eager kernels), and eager calls dispatch to the device's eager
  /// kernels. With `eager_on_host`, both run on the host instead, their operands copied there
  /// and their results back: the device's eager kernels are single-op plans themselves.
  /// host_steps() lists the steps that run on the host.
  void run_on(Device device, std::span<const std::pair<std::string, DeviceLaunch>> launches,
              bool eager_on_host = false);
  Device device() const { return device_; }
  /// Steps run_on sends to the host, one line each ("step 3: matmul").
  std::span<const std::string> host_steps() const { return host_steps_; }

  /// Runs the plan on `inputs` (indexed as bind_input numbered them), performs the writes and
  /// returns the outputs. Tracing is suspended while it runs.
  ///
  /// `into[k]`, when given and defined, is where output k may be written: a generated kernel,
  /// library call or attention step whose result is output k, contiguous and of into[k]'s
  /// sizes and dtype, writes into it instead of a fresh tensor, and an eager call (not a view)
  /// writes into it as its out= tensor, which must be of output k's sizes. The returned output
  /// then shares its storage; callers compare to know whether a copy is still due. `kiln aot`
  /// libraries write their outputs straight into the caller's buffers this way.
  std::vector<Tensor> run(std::span<const Tensor> inputs, std::span<const Tensor> into = {}) const;

  std::span<const Step> steps() const { return steps_; }
  std::span<const KernelCall> kernels() const { return kernels_; }
  std::span<const Write> writes() const { return writes_; }
  std::span<const size_t> outputs() const { return outputs_; }
  size_t num_slots() const { return num_slots_; }
  const MemoryPlan& memory_plan() const { return memory_; }
  /// (slot, value) of each constant, and (slot, caller input index) of each input.
  std::span<const std::pair<size_t, Tensor>> constants() const { return constants_; }
  std::span<const std::pair<size_t, size_t>> inputs() const { return inputs_; }
  const Placement& placement(size_t slot) const { return placement_.at(slot); }
  /// Performs the writes on slot values as run() does when the graph ends.
  void apply_writes(std::span<const Tensor> slots) const;
  /// The tensor of a planned slot in `arena` (a fresh one when the slot has no bytes or there
  /// is no arena).
  Tensor placed(size_t slot, const std::shared_ptr<Storage>& arena) const;

private:
  size_t num_slots_ = 0;
  std::vector<std::pair<size_t, Tensor>> constants_;
  std::vector<std::pair<size_t, size_t>> inputs_; // slot, caller input index
  std::vector<KernelCall> kernels_;
  std::vector<Step> steps_;
  std::vector<size_t> outputs_;
  std::vector<Write> writes_;
  std::vector<std::pair<size_t, size_t>> in_place_; // (source, target) slots
  std::vector<int64_t> into_input_;                 // per slot: the target slot, or -1
  std::vector<Placement> placement_;                // per slot
  MemoryPlan memory_;
  Device device_ = Device::cpu();
  bool eager_on_host_ = false;
  std::vector<std::string> host_steps_;
};

} // namespace kiln
