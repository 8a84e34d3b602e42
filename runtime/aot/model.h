// A model compiled ahead of time, as its library runs it (include/kiln/kiln_aot.h): the
// manifest that describes it, and the model itself: a loaded plan, its weights bound to the
// plan's inputs, and the checks that turn bad input into a kiln::Error. The library's entry
// point (runtime/aot/entry.cpp) wraps it in the C ABI; `kiln aot` writes the manifest.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/plan_io.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace kiln::aot {

/// The weights file's metadata key holding the graph hash it belongs to.
inline constexpr const char* kGraphHashKey = "kiln.graph_hash";

/// A named tensor's type (inputs and outputs are unnamed).
struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  Shape sizes;
  std::string str() const; // "f32 [8, 784]"
};

/// What a library holds besides its plan and kernels: its JSON, which describe() returns.
///
///   {"format": "kiln.aot/1", "name": "mlp", "kiln_version": "0.1.0", "graph_hash": "...",
///    "device": "cpu", "cpu": "x86-64-v3", "cpu_features": ["avx2", "fma", ...], "weights":
///    "file"|"embedded"|"none", "inputs": [{"dtype": "f32", "sizes": [8, 784]}], "outputs": [...],
///    "parameters": [{"name": "fc1.weight", "dtype": "f32", "sizes": [256, 784]}, ...],
///    "plan_inputs": [{"input": 0} | {"parameter": 2} | {"none": 0}, ...],
///    "results": [0, ...]}
///
/// plan_inputs says what each of the plan's inputs is bound to: a caller's input, a parameter
/// (a weight, by its place in "parameters") or nothing (a value the plan does not read);
/// results gives, per output, the plan output it is.
struct Manifest {
  std::string name, kiln_version, graph_hash, cpu;
  /// Where the kernels run: "cpu" (the CUDA backend adds its device and embedded code).
  std::string device = "cpu";
  std::string weights = "file";
  /// The instruction-set features the kernels may use (LLVM's names): checked before a run.
  std::vector<std::string> cpu_features;
  std::vector<TensorSpec> inputs, outputs, parameters;
  struct PlanInput {
    enum class Kind : uint8_t { input, parameter, none };
    Kind kind = Kind::none;
    size_t index = 0;
  };
  std::vector<PlanInput> plan_inputs;
  std::vector<size_t> results;

  std::string json() const;
  /// Reads json()'s text back; a kiln::Error for anything malformed or inconsistent (an index
  /// out of range).
  static Manifest parse(std::string_view json);
};

/// Throws a kiln::Error naming the features of manifest.cpu_features that `has` says this CPU
/// lacks, so that a library compiled for another CPU fails to create instead of crashing on an
/// illegal instruction. Features `has` does not know are not checked.
void check_cpu(const Manifest& manifest, const std::function<bool(std::string_view)>& has);
/// Whether this CPU has a feature (LLVM's name) kernels use: the SSE4, AVX, AVX2, FMA, F16C,
/// BMI and AVX-512 families (cpuid); true for any other name.
bool cpu_has(std::string_view feature);

/// Reads the weights of `manifest` from a safetensors file, checked: the file exists and is
/// well formed, its graph hash (metadata kGraphHashKey) is the manifest's, and every
/// parameter is there with its dtype and sizes. A kiln::Error naming the file otherwise.
std::map<std::string, Tensor> read_weights(const Manifest& manifest, const std::string& path);
/// The same for weights held in memory (embedded in the library): no hash to check.
std::map<std::string, Tensor> read_weights_bytes(const Manifest& manifest, std::string_view bytes,
                                                 const std::string& origin);

/// One runnable model: its own plan and weights. One run at a time; models share nothing, so
/// several run at once on different threads.
class Model {
public:
  /// Loads the plan (kernels by `resolve`) and binds `weights` (read_weights's) to it.
  Model(Manifest manifest, std::string_view plan, const KernelResolver& resolve,
        std::map<std::string, Tensor> weights);

  const Manifest& manifest() const { return manifest_; }

  /// Runs the model on `inputs` (checked against the manifest: count, dtype, sizes) and
  /// returns its outputs.
  std::vector<Tensor> run(std::span<const Tensor> inputs);
  /// run(), with each output copied into out[k] (checked as the inputs are).
  void run_into(std::span<const Tensor> inputs, std::span<Tensor> out);

private:
  std::vector<Tensor> run_plan(std::span<const Tensor> inputs, std::span<const Tensor> into);
  Manifest manifest_;
  std::unique_ptr<LoadedPlan> plan_;
  std::vector<Tensor> bound_; // per plan input: the parameter, or a caller's input during a run
};

/// A caller's buffer as a tensor (contiguous, not owned, never freed).
Tensor borrow(void* data, DType dtype, IntList sizes);

} // namespace kiln::aot
