// A model compiled ahead of time: its manifest, its weights and its runs.
#include "runtime/aot/model.h"

#include <sstream>

#include "runtime/serialize/json.h"
#include "runtime/serialize/safetensors.h"
#include "runtime/tensor_impl.h"

namespace kiln::aot {
namespace {

[[noreturn]] void fail(const std::string& message) { throw Error::without_location(message); }

std::string sizes_str(IntList sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

std::string spec_json(const TensorSpec& t) {
  std::string s = "{";
  if (!t.name.empty()) s += "\"name\": " + json::quote(t.name) + ", ";
  s += "\"dtype\": \"" + std::string(dtype_name(t.dtype)) + "\", \"sizes\": " + sizes_str(t.sizes);
  return s + "}";
}

template <typename T, typename F> std::string list_json(const std::vector<T>& items, F&& item) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i)
    s += (i ? ", " : "") + item(items[i]);
  return s + "]";
}

// Reading: every lookup names what it wanted, so a malformed manifest says where.
const json::Value& member(const json::Value& v, std::string_view key, std::string_view where) {
  if (v.type == json::Value::Type::object)
    for (const json::Value::Member& m : v.object)
      if (m.key == key) return m.value;
  fail("library manifest: " + std::string(where) + " has no \"" + std::string(key) + "\"");
}

std::string string_of(const json::Value& v, std::string_view key) {
  const json::Value& s = member(v, key, "the manifest");
  if (s.type != json::Value::Type::string)
    fail("library manifest: \"" + std::string(key) + "\" is not a string");
  return s.string;
}

int64_t int_of(const json::Value& v, std::string_view what) {
  if (v.type != json::Value::Type::number || !v.is_int64 || v.int64 < 0)
    fail("library manifest: " + std::string(what) + " is not a non-negative integer");
  return v.int64;
}

const std::vector<json::Value>& array_of(const json::Value& v, std::string_view key) {
  const json::Value& a = member(v, key, "the manifest");
  if (a.type != json::Value::Type::array)
    fail("library manifest: \"" + std::string(key) + "\" is not an array");
  return a.array;
}

std::vector<TensorSpec> specs_of(const json::Value& v, std::string_view key, bool named) {
  std::vector<TensorSpec> out;
  for (const json::Value& e : array_of(v, key)) {
    TensorSpec t;
    if (named) {
      const json::Value& n = member(e, "name", key);
      if (n.type != json::Value::Type::string) fail("library manifest: a name is not a string");
      t.name = n.string;
    }
    const json::Value& d = member(e, "dtype", key);
    if (d.type != json::Value::Type::string || !parse_dtype(d.string, t.dtype))
      fail("library manifest: a dtype of \"" + std::string(key) + "\" is not a dtype");
    const json::Value& sizes = member(e, "sizes", key);
    if (sizes.type != json::Value::Type::array) fail("library manifest: sizes are not an array");
    for (const json::Value& s : sizes.array)
      t.sizes.push_back(int_of(s, "a size"));
    out.push_back(std::move(t));
  }
  return out;
}

/// The tensors of `all` that `manifest` names, checked against its parameters.
std::map<std::string, Tensor> check_weights(const Manifest& manifest,
                                            std::map<std::string, Tensor> all,
                                            const std::string& origin) {
  std::map<std::string, Tensor> out;
  for (const TensorSpec& p : manifest.parameters) {
    auto it = all.find(p.name);
    if (it == all.end())
      fail("weights " + origin + ": no tensor '" + p.name + "' (the model needs " + p.str() + ")");
    const Tensor& t = it->second;
    if (t.dtype() != p.dtype || t.sizes() != p.sizes)
      fail("weights " + origin + ": tensor '" + p.name + "' is " +
           TensorSpec{"", t.dtype(), t.sizes()}.str() + ", the model needs " + p.str());
    out.emplace(p.name, std::move(it->second));
  }
  return out;
}

/// Checks tensor k of `what` ("input", "output") against its spec.
void check_tensor(const Tensor& t, const TensorSpec& spec, std::string_view what, size_t k) {
  if (!t.defined())
    fail(std::string(what) + " " + std::to_string(k) + ": expected " + spec.str() + ", got none");
  if (t.dtype() != spec.dtype || t.sizes() != spec.sizes)
    fail(std::string(what) + " " + std::to_string(k) + ": expected " + spec.str() + ", got " +
         TensorSpec{"", t.dtype(), t.sizes()}.str());
}

} // namespace

std::string TensorSpec::str() const {
  return std::string(dtype_name(dtype)) + " " + sizes_str(sizes);
}

std::string Manifest::json() const {
  std::ostringstream os;
  os << "{\"format\": \"kiln.aot/1\", \"name\": " << json::quote(name)
     << ", \"kiln_version\": " << json::quote(kiln_version)
     << ", \"graph_hash\": " << json::quote(graph_hash) << ", \"device\": " << json::quote(device)
     << ", \"cpu\": " << json::quote(cpu) << ",\n \"cpu_features\": "
     << list_json(cpu_features, [](const std::string& f) { return json::quote(f); })
     << ",\n \"weights\": " << json::quote(weights)
     << ",\n \"inputs\": " << list_json(inputs, spec_json)
     << ",\n \"outputs\": " << list_json(outputs, spec_json)
     << ",\n \"parameters\": " << list_json(parameters, spec_json) << ",\n \"plan_inputs\": "
     << list_json(plan_inputs,
                  [](const PlanInput& p) {
                    const char* key = p.kind == PlanInput::Kind::input       ? "input"
                                      : p.kind == PlanInput::Kind::parameter ? "parameter"
                                                                             : "none";
                    return "{\"" + std::string(key) + "\": " + std::to_string(p.index) + "}";
                  })
     << ",\n \"results\": " << list_json(results, [](size_t r) { return std::to_string(r); })
     << "}\n";
  return os.str();
}

Manifest Manifest::parse(std::string_view text) {
  const json::Value v = json::parse(text, "library manifest");
  Manifest m;
  if (string_of(v, "format") != "kiln.aot/1")
    fail("library manifest: format is not kiln.aot/1 (a library of another kiln version)");
  m.name = string_of(v, "name");
  m.kiln_version = string_of(v, "kiln_version");
  m.graph_hash = string_of(v, "graph_hash");
  m.device = string_of(v, "device");
  if (m.device != "cpu")
    fail("library manifest: device \"" + m.device + "\" is not one this kiln runs (cpu)");
  m.cpu = string_of(v, "cpu");
  m.weights = string_of(v, "weights");
  for (const json::Value& f : array_of(v, "cpu_features")) {
    if (f.type != json::Value::Type::string)
      fail("library manifest: a cpu feature is not a string");
    m.cpu_features.push_back(f.string);
  }
  m.inputs = specs_of(v, "inputs", false);
  m.outputs = specs_of(v, "outputs", false);
  m.parameters = specs_of(v, "parameters", true);
  for (const json::Value& e : array_of(v, "plan_inputs")) {
    if (e.type != json::Value::Type::object || e.object.size() != 1)
      fail("library manifest: a plan input is not an object of one key");
    PlanInput p;
    const std::string& key = e.object[0].key;
    p.index = static_cast<size_t>(int_of(e.object[0].value, "a plan input's index"));
    if (key == "input" && p.index < m.inputs.size())
      p.kind = PlanInput::Kind::input;
    else if (key == "parameter" && p.index < m.parameters.size())
      p.kind = PlanInput::Kind::parameter;
    else if (key != "none")
      fail("library manifest: plan input {\"" + key + "\": " + std::to_string(p.index) +
           "} names nothing");
    m.plan_inputs.push_back(p);
  }
  for (const json::Value& r : array_of(v, "results"))
    m.results.push_back(static_cast<size_t>(int_of(r, "a result")));
  if (m.results.size() != m.outputs.size())
    fail("library manifest: " + std::to_string(m.results.size()) + " results for " +
         std::to_string(m.outputs.size()) + " outputs");
  return m;
}

void check_cpu(const Manifest& manifest, const std::function<bool(std::string_view)>& has) {
  std::string missing;
  for (const std::string& f : manifest.cpu_features)
    if (!has(f)) missing += (missing.empty() ? "" : ", ") + f;
  if (!missing.empty())
    fail("this CPU lacks " + missing + ", which the library's kernels (compiled for " +
         manifest.cpu + ") use; compile the model with kiln aot --cpu for this CPU");
}

bool cpu_has(std::string_view f) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const std::pair<std::string_view, bool> known[] = {
      {"sse4.1", __builtin_cpu_supports("sse4.1")},
      {"sse4.2", __builtin_cpu_supports("sse4.2")},
      {"popcnt", __builtin_cpu_supports("popcnt")},
      {"avx", __builtin_cpu_supports("avx")},
      {"avx2", __builtin_cpu_supports("avx2")},
      {"fma", __builtin_cpu_supports("fma")},
      {"f16c", __builtin_cpu_supports("f16c")},
      {"bmi", __builtin_cpu_supports("bmi")},
      {"bmi2", __builtin_cpu_supports("bmi2")},
      {"avx512f", __builtin_cpu_supports("avx512f")},
      {"avx512vl", __builtin_cpu_supports("avx512vl")},
      {"avx512bw", __builtin_cpu_supports("avx512bw")},
      {"avx512dq", __builtin_cpu_supports("avx512dq")},
      {"avx512cd", __builtin_cpu_supports("avx512cd")},
      {"avx512vnni", __builtin_cpu_supports("avx512vnni")},
      {"avx512vbmi", __builtin_cpu_supports("avx512vbmi")},
      {"avx512bf16", __builtin_cpu_supports("avx512bf16")},
  };
  for (const auto& [name, present] : known)
    if (name == f) return present;
#else
  (void)f;
#endif
  return true;
}

std::map<std::string, Tensor> read_weights(const Manifest& manifest, const std::string& path) {
  const std::map<std::string, std::string> metadata = load_metadata(path);
  auto hash = metadata.find(kGraphHashKey);
  if (hash == metadata.end())
    fail("weights " + path + ": no " + std::string(kGraphHashKey) +
         " in its metadata (not written by kiln aot for this model)");
  if (hash->second != manifest.graph_hash)
    fail("weights " + path + ": they belong to graph " + hash->second + ", the library's is " +
         manifest.graph_hash);
  return check_weights(manifest, load(path), path);
}

std::map<std::string, Tensor> read_weights_bytes(const Manifest& manifest, std::string_view bytes,
                                                 const std::string& origin) {
  return check_weights(manifest, load_bytes(bytes, origin), origin);
}

Model::Model(Manifest manifest, std::string_view plan, const KernelResolver& resolve,
             std::map<std::string, Tensor> weights)
    : manifest_(std::move(manifest)), plan_(load_plan(plan, resolve)) {
  for (const auto& [slot, index] : plan_->plan.inputs())
    if (index >= manifest_.plan_inputs.size())
      fail("library: the plan reads input " + std::to_string(index) + " of " +
           std::to_string(manifest_.plan_inputs.size()));
  for (size_t r : manifest_.results)
    if (r >= plan_->plan.outputs().size())
      fail("library: result " + std::to_string(r) + " of a plan with " +
           std::to_string(plan_->plan.outputs().size()) + " outputs");
  bound_.resize(manifest_.plan_inputs.size());
  for (size_t k = 0; k < bound_.size(); ++k) {
    const Manifest::PlanInput& p = manifest_.plan_inputs[k];
    if (p.kind != Manifest::PlanInput::Kind::parameter) continue;
    const std::string& name = manifest_.parameters[p.index].name;
    auto it = weights.find(name);
    if (it == weights.end()) fail("weights: no tensor '" + name + "'");
    bound_[k] = it->second;
  }
}

std::vector<Tensor> Model::run(std::span<const Tensor> inputs) { return run_plan(inputs, {}); }

std::vector<Tensor> Model::run_plan(std::span<const Tensor> inputs, std::span<const Tensor> into) {
  if (inputs.size() != manifest_.inputs.size())
    fail("model " + manifest_.name + " takes " + std::to_string(manifest_.inputs.size()) +
         " inputs, got " + std::to_string(inputs.size()));
  for (size_t k = 0; k < inputs.size(); ++k)
    check_tensor(inputs[k], manifest_.inputs[k], "input", k);
  for (size_t k = 0; k < bound_.size(); ++k)
    if (manifest_.plan_inputs[k].kind == Manifest::PlanInput::Kind::input)
      bound_[k] = inputs[manifest_.plan_inputs[k].index];
  std::vector<Tensor> outs = plan_->plan.run(bound_, into);
  for (size_t k = 0; k < bound_.size(); ++k)
    if (manifest_.plan_inputs[k].kind == Manifest::PlanInput::Kind::input) bound_[k] = Tensor();
  std::vector<Tensor> results;
  for (size_t r : manifest_.results)
    results.push_back(outs[r]);
  return results;
}

void Model::run_into(std::span<const Tensor> inputs, std::span<Tensor> out) {
  if (out.size() != manifest_.outputs.size())
    fail("model " + manifest_.name + " has " + std::to_string(manifest_.outputs.size()) +
         " outputs, got " + std::to_string(out.size()));
  for (size_t k = 0; k < out.size(); ++k)
    check_tensor(out[k], manifest_.outputs[k], "output", k);
  // The plan writes each output it computes contiguously straight into the caller's buffer;
  // the others (a view, an output that is also another's) are copied there.
  std::vector<Tensor> into(plan_->plan.outputs().size());
  for (size_t k = 0; k < out.size(); ++k)
    if (!into[manifest_.results[k]].defined()) into[manifest_.results[k]] = out[k];
  std::vector<Tensor> results = run_plan(inputs, into);
  for (size_t k = 0; k < out.size(); ++k)
    if (results[k].impl().storage != out[k].impl().storage ||
        results[k].raw_data() != out[k].raw_data())
      out[k].copy_(results[k]);
}

Tensor borrow(void* data, DType dtype, IntList sizes) {
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = Shape(sizes.begin(), sizes.end());
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  impl->device = Device::cpu();
  const size_t nbytes = static_cast<size_t>(numel_of(sizes) * itemsize(dtype));
  impl->storage = std::make_shared<Storage>(data, nbytes, Device::cpu());
  return Tensor(std::move(impl));
}

} // namespace kiln::aot
