// kiln_aot_entry: the one exported symbol of a library `kiln aot` builds. It implements the C
// ABI of include/kiln/kiln_aot.h over runtime/aot/model.h, reading the plan, manifest, kernel
// table and embedded weights that the library's data object defines (codegen/cpu/aot_object.h).
// Compiled into libkiln_runtime_aot.a only: its symbols are the library's.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "include/kiln/kiln_aot.h"
#include "runtime/aot/model.h"

extern "C" {
struct KilnAotKernel {
  const char* name;
  kiln::KernelEntry entry;
};
#define KILN_HIDDEN __attribute__((visibility("hidden")))
KILN_HIDDEN extern const KilnAotKernel kiln_aot_kernels[];
KILN_HIDDEN extern const uint64_t kiln_aot_num_kernels;
KILN_HIDDEN extern const char kiln_aot_plan[];
KILN_HIDDEN extern const uint64_t kiln_aot_plan_size;
KILN_HIDDEN extern const char kiln_aot_manifest[];
KILN_HIDDEN extern const char kiln_aot_weights[];
KILN_HIDDEN extern const uint64_t kiln_aot_weights_size;
#undef KILN_HIDDEN
}

struct kiln_model {
  kiln::aot::Model model;
};

namespace {

using kiln::aot::Manifest;

static_assert(static_cast<int>(kiln::DType::bool_) == KILN_BOOL &&
                  static_cast<int>(kiln::DType::f64) == KILN_F64 &&
                  static_cast<int>(kiln::DType::i64) == KILN_I64,
              "kiln_dtype numbers DType's enumerators in their order");

void set_error(char* err, size_t size, const char* message) {
  if (err != nullptr && size > 0) std::snprintf(err, size, "%s", message);
}

/// The library's manifest, parsed once (a malformed one is an error of every create).
const Manifest& manifest() {
  static const Manifest m = Manifest::parse(kiln_aot_manifest);
  return m;
}

kiln::KernelEntry resolve(std::string_view name) {
  static const std::unordered_map<std::string_view, kiln::KernelEntry> table = [] {
    std::unordered_map<std::string_view, kiln::KernelEntry> t;
    for (uint64_t k = 0; k < kiln_aot_num_kernels; ++k)
      t.emplace(kiln_aot_kernels[k].name, kiln_aot_kernels[k].entry);
    return t;
  }();
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

/// NAME.safetensors in the directory of this library.
std::string weights_beside_library(const Manifest& m) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&kiln_aot_entry), &info) == 0 ||
      info.dli_fname == nullptr)
    throw kiln::Error::without_location("can't find the library's own path for its weights");
  return (std::filesystem::path(info.dli_fname).parent_path() / (m.name + ".safetensors")).string();
}

kiln_model* create(const char* weights_path, char* err, size_t err_size) {
  try {
    const Manifest& m = manifest();
    kiln::aot::check_cpu(m, kiln::aot::cpu_has);
    std::map<std::string, kiln::Tensor> weights;
    if (weights_path != nullptr)
      weights = kiln::aot::read_weights(m, weights_path);
    else if (m.weights == "embedded")
      weights = kiln::aot::read_weights_bytes(
          m, std::string_view(kiln_aot_weights, kiln_aot_weights_size), "embedded in the library");
    else if (!m.parameters.empty())
      weights = kiln::aot::read_weights(m, weights_beside_library(m));
    return new kiln_model{kiln::aot::Model(m, std::string_view(kiln_aot_plan, kiln_aot_plan_size),
                                           resolve, std::move(weights))};
  } catch (const std::exception& e) {
    set_error(err, err_size, e.what());
  } catch (...) {
    set_error(err, err_size, "create: unknown failure");
  }
  return nullptr;
}

/// The C tensors as borrowed kiln tensors; a kiln::Error for a malformed one.
std::vector<kiln::Tensor> borrow_all(const kiln_tensor* ts, size_t n, const char* what) {
  if (ts == nullptr && n > 0)
    throw kiln::Error::without_location(std::string(what) + "s: NULL array of " +
                                        std::to_string(n));
  std::vector<kiln::Tensor> out;
  for (size_t k = 0; k < n; ++k) {
    const kiln_tensor& t = ts[k];
    const std::string name = std::string(what) + " " + std::to_string(k);
    // Read as an integer: a value that is no enumerator is the caller's, not ours to trust.
    std::underlying_type_t<kiln_dtype> dtype = 0;
    std::memcpy(&dtype, &t.dtype, sizeof dtype);
    if (static_cast<uint64_t>(static_cast<int64_t>(dtype)) > KILN_BOOL)
      throw kiln::Error::without_location(name + ": dtype " + std::to_string(dtype) +
                                          " is not a kiln_dtype");
    if (t.rank < 0 || t.rank > KILN_AOT_MAX_RANK)
      throw kiln::Error::without_location(name + ": rank " + std::to_string(t.rank) +
                                          " is out of range");
    if (t.sizes == nullptr && t.rank > 0)
      throw kiln::Error::without_location(name + ": NULL sizes");
    kiln::Shape sizes(t.sizes, t.sizes + t.rank);
    for (int64_t s : sizes)
      if (s < 0) throw kiln::Error::without_location(name + ": a negative size");
    if (t.data == nullptr) throw kiln::Error::without_location(name + ": NULL data");
    out.push_back(kiln::aot::borrow(t.data, static_cast<kiln::DType>(dtype), sizes));
  }
  return out;
}

int run(kiln_model* model, const kiln_tensor* in, size_t n_in, kiln_tensor* out, size_t n_out,
        char* err, size_t err_size) {
  try {
    if (model == nullptr) throw kiln::Error::without_location("run: NULL model");
    std::vector<kiln::Tensor> inputs = borrow_all(in, n_in, "input");
    std::vector<kiln::Tensor> outputs = borrow_all(out, n_out, "output");
    model->model.run_into(inputs, outputs);
    return 0;
  } catch (const std::exception& e) {
    set_error(err, err_size, e.what());
  } catch (...) {
    set_error(err, err_size, "run: unknown failure");
  }
  return 1;
}

void destroy(kiln_model* model) { delete model; }

size_t num_inputs(const kiln_model* model) {
  return model ? model->model.manifest().inputs.size() : 0;
}
size_t num_outputs(const kiln_model* model) {
  return model ? model->model.manifest().outputs.size() : 0;
}

int info(const std::vector<kiln::aot::TensorSpec>& specs, size_t i, kiln_dtype* dtype,
         int32_t* rank, int64_t* sizes) {
  if (i >= specs.size() || dtype == nullptr || rank == nullptr || sizes == nullptr) return 1;
  const kiln::aot::TensorSpec& s = specs[i];
  *dtype = static_cast<kiln_dtype>(s.dtype);
  *rank = static_cast<int32_t>(s.sizes.size());
  std::memcpy(sizes, s.sizes.data(), s.sizes.size() * sizeof(int64_t));
  return 0;
}
int input_info(const kiln_model* model, size_t i, kiln_dtype* dtype, int32_t* rank,
               int64_t* sizes) {
  return model ? info(model->model.manifest().inputs, i, dtype, rank, sizes) : 1;
}
int output_info(const kiln_model* model, size_t i, kiln_dtype* dtype, int32_t* rank,
                int64_t* sizes) {
  return model ? info(model->model.manifest().outputs, i, dtype, rank, sizes) : 1;
}

const char* describe() { return kiln_aot_manifest; }

constexpr kiln_aot_api kApi = {KILN_AOT_ABI_VERSION, create,     run,         destroy, num_inputs,
                               num_outputs,          input_info, output_info, describe};

} // namespace

/// The table; the data object's name-prefixed entry (NAME_aot_entry) returns it too.
extern "C" __attribute__((visibility("hidden"))) const kiln_aot_api* kiln_aot_api_table(void) {
  return &kApi;
}

extern "C" __attribute__((visibility("default"))) const kiln_aot_api* kiln_aot_entry(void) {
  return &kApi;
}
