// kiln::aot::load: a `kiln aot` library called through its C ABI.
#include "runtime/aot/load.h"

#include <dlfcn.h>

#include <mutex>

#include "include/kiln/kiln_aot.h"
#include "runtime/plan.h"

namespace kiln::aot {

struct LoadedModel::State {
  std::string path;
  void* library = nullptr;
  const kiln_aot_api* api = nullptr;
  kiln_model* model = nullptr;
  std::mutex mu;
  ~State() {
    if (model != nullptr) api->destroy(model);
    if (library != nullptr) dlclose(library);
  }
};

namespace {

std::pair<DType, Shape> info(const LoadedModel::State& s, size_t i, bool input) {
  kiln_dtype dtype = KILN_F32;
  int32_t rank = 0;
  int64_t sizes[KILN_AOT_MAX_RANK] = {};
  const int rc = input ? s.api->input_info(s.model, i, &dtype, &rank, sizes)
                       : s.api->output_info(s.model, i, &dtype, &rank, sizes);
  KILN_CHECK(rc == 0, "aot model ", s.path, ": no ", input ? "input " : "output ", i);
  return {static_cast<DType>(dtype), Shape(sizes, sizes + rank)};
}

kiln_tensor c_tensor(const Tensor& t) {
  return {t.raw_data(), static_cast<kiln_dtype>(t.dtype()), static_cast<int32_t>(t.dim()),
          t.sizes().data()};
}

} // namespace

LoadedModel load(const std::string& path, const std::string& weights) {
  auto s = std::make_shared<LoadedModel::State>();
  s->path = path;
  s->library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (s->library == nullptr) {
    const char* why = dlerror();
    throw Error::without_location("aot: can't load " + path + ": " + (why ? why : "dlopen failed"));
  }
  auto entry = reinterpret_cast<const kiln_aot_api* (*)()>(dlsym(s->library, "kiln_aot_entry"));
  if (entry == nullptr)
    throw Error::without_location("aot: " + path +
                                  " is not a kiln aot library (no kiln_aot_entry)");
  s->api = entry();
  if (s->api == nullptr || s->api->abi_version < KILN_AOT_ABI_VERSION)
    throw Error::without_location("aot: " + path + " has an older ABI than this kiln's (" +
                                  std::to_string(KILN_AOT_ABI_VERSION) + ")");
  char err[2048] = {};
  s->model = s->api->create(weights.empty() ? nullptr : weights.c_str(), err, sizeof err);
  if (s->model == nullptr) throw Error::without_location("aot model " + path + ": " + err);
  LoadedModel m;
  m.state_ = std::move(s);
  return m;
}

std::vector<Tensor> LoadedModel::operator()(std::span<const Tensor> inputs) const {
  State& s = *state_;
  std::vector<Tensor> in;
  std::vector<kiln_tensor> c_in;
  for (const Tensor& t : inputs) {
    KILN_CHECK(t.defined(), "aot model ", s.path, ": an undefined input tensor");
    KILN_CHECK(t.device().is_cpu(), "aot model ", s.path, ": inputs must be CPU tensors, got ",
               t.device().str());
    in.push_back(t.contiguous());
    c_in.push_back(c_tensor(in.back()));
  }
  std::vector<Tensor> out;
  std::vector<kiln_tensor> c_out;
  for (size_t i = 0; i < num_outputs(); ++i) {
    auto [dtype, sizes] = output(i);
    out.push_back(empty_with_layout(sizes, {}, dtype));
  }
  for (const Tensor& t : out)
    c_out.push_back(c_tensor(t));
  char err[2048] = {};
  std::lock_guard lock(s.mu);
  if (s.api->run(s.model, c_in.data(), c_in.size(), c_out.data(), c_out.size(), err, sizeof err) !=
      0)
    throw Error("aot model " + s.path + ": " + err);
  return out;
}

Tensor LoadedModel::operator()(const Tensor& x) const {
  KILN_CHECK(num_outputs() == 1, "aot model ", state_->path, " has ", num_outputs(),
             " outputs; call it with a span of inputs");
  return (*this)(std::span<const Tensor>(&x, 1)).front();
}

size_t LoadedModel::num_inputs() const { return state_->api->num_inputs(state_->model); }
size_t LoadedModel::num_outputs() const { return state_->api->num_outputs(state_->model); }
std::pair<DType, Shape> LoadedModel::input(size_t i) const { return info(*state_, i, true); }
std::pair<DType, Shape> LoadedModel::output(size_t i) const { return info(*state_, i, false); }
std::string LoadedModel::describe() const { return state_->api->describe(); }

} // namespace kiln::aot
