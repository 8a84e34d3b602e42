// StaticPlan: a Plan fixed to one geometry of its inputs, for Mode::reduce_overhead. What
// Plan::run decides on every call is decided once, when the plan is built:
//
// - every intermediate the memory plan placed lives in one arena the static plan owns (not
//   one per run), and its address is known;
// - each generated kernel's argument block (its buffer pointers) is prebuilt, and a run only
//   patches the pointers of inputs and fresh results into it;
// - each library call is prepared (PreparedLibraryCall: primitive, argument block, scratchpad,
//   packed weights) and rerun on the new addresses;
// - a view step is an address plus a fixed byte offset (the view of a tensor of fixed sizes
//   and strides is always at the same offset from it); a Tensor is built for it only when an
//   eager step, a write or the caller needs one;
// - the graph's outputs are the only allocations of a run: fresh tensors from the caching
//   allocator, or, with Options::static_outputs, buffers of the static plan that the next run
//   overwrites.
//
// Steps with no such form (an op with no lowering, a library call oneDNN does not take) run
// through dispatch as in Plan::run, on Tensors. A run is not reentrant: the arena and the
// argument blocks are the plan's (the compiled function serialises its calls).
//
// A run is three parts: bind (the inputs' addresses into the argument blocks), launch (the
// steps in order) and collect (outputs and in-place writes). A device backend keeps bind and
// collect and replaces launch: with the addresses fixed by the arena, the CUDA backend records
// launch once into a CUDA graph and replays that graph instead.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/epilogue.h"
#include "runtime/plan.h"
#include "runtime/tensor.h"

namespace kiln {

class StaticPlan {
public:
  struct Options {
    /// The outputs are views into buffers of this plan that the next run overwrites (as
    /// torch.compile's CUDA-graph outputs are): a run allocates nothing. Clone an output to
    /// keep it past the next call.
    bool static_outputs = false;
    /// Time each run's parts (timings()).
    bool time = false;
  };
  /// Totals over the timed runs, in nanoseconds.
  struct Timings {
    int64_t runs = 0;
    double total_ns = 0;   // bind, launch and collect
    double kernels_ns = 0; // inside generated kernels, library calls and eager calls
    /// kernels_ns by kind of step.
    double generated_ns = 0, library_ns = 0, eager_ns = 0;
  };
  /// How the steps run (for logs and tests).
  struct Summary {
    size_t kernels = 0, library_calls = 0, views = 0, eager_calls = 0;
    size_t arena_bytes = 0, scratch_bytes = 0, static_output_bytes = 0;
    std::string str() const;
  };

  /// Builds the static plan of `plan` (which must outlive it) for inputs of exactly these
  /// dtypes, sizes and strides, running the plan once on them: that run's outputs are returned
  /// in `outputs`. Null (the outputs still returned) when an output would share the arena,
  /// which the next run overwrites: the plan then keeps running as a Plan.
  static std::unique_ptr<StaticPlan> build(const Plan& plan, std::span<const Tensor> inputs,
                                           Options options, std::vector<Tensor>& outputs);
  ~StaticPlan();

  /// Runs on inputs of the geometry it was built for (the caller's guards ensure it).
  std::vector<Tensor> run(std::span<const Tensor> inputs);

  const Timings& timings() const { return timings_; }
  void reset_timings() { timings_ = {}; }
  const Summary& summary() const { return summary_; }

private:
  StaticPlan(const Plan& plan, Options options);
  /// input: the caller's input `input` (or a kernel result computed into its buffer).
  enum class Source : uint8_t { unused, input, fixed, fresh, view, tensor };
  struct Slot {
    Source source = Source::unused;
    size_t input = 0;    // input: the caller's input index
    size_t base = 0;     // view: the viewed slot
    ptrdiff_t delta = 0; // view: bytes from the base's address
    bool needs_tensor = false;
    /// A view's base (not fixed): kept to the end of the run, not released after its last
    /// reader. A view slot without a tensor holds only an address into the base's storage,
    /// which its own readers (a library call, a kernel) may use after the base's last read.
    bool viewed = false;
    Shape sizes;   // fresh: the result's; view: the view's
    Shape strides; // fresh: the result's layout (empty: contiguous); view: the view's
    DType dtype = DType::f32;
    Tensor fixed; // fixed: a constant, an arena buffer or a static output
  };
  enum class Kind : uint8_t { kernel, library, view, eager };
  struct Step {
    Kind kind = Kind::eager;
    const Plan::Step* step = nullptr;
    bool skip = false;          // kernel: no rows, or only empty results
    std::vector<char*> buffers; // kernel: operands then results; library: the same
    std::unique_ptr<PreparedLibraryCall> library;
  };

  void bind(std::span<const Tensor> inputs);
  void launch();
  std::vector<Tensor> collect();
  void fresh(size_t slot);
  void fill(Step& s);
  void run_eager(const Step& s);
  Tensor view_of(const Plan::Step& st) const;

  const Plan& plan_;
  Options options_;
  std::shared_ptr<Storage> arena_;
  std::shared_ptr<Storage> scratch_; // the library calls' scratch memory, shared
  std::vector<Slot> slots_;
  std::vector<Step> steps_;
  std::vector<size_t> in_place_; // kernel results computed into an input's buffer (Source::input)
  // Per run (kept between runs so that a run allocates nothing):
  std::vector<char*> address_;   // per slot
  std::vector<Tensor> tensors_;  // per slot, where a Tensor is needed
  std::vector<Tensor> operands_; // an eager step's
  Timings timings_;
  Summary summary_;
};

} // namespace kiln
