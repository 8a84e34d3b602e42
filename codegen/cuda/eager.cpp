// CUDA's eager kernels: single-op graphs through the lowering pipeline.
#include "codegen/cuda/eager.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "codegen/cuda/cuda_target.h"
#include "codegen/cuda/library.h"
#include "codegen/lower.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "runtime/cuda/blas.h"
#include "runtime/cuda/device.h"
#include "runtime/ops/dispatch.h"
#include "runtime/tensor_impl.h"
#include "runtime/tracing.h"

namespace kiln::codegen::cuda {
namespace {

std::atomic<int64_t> g_compiled{0}, g_host_fallbacks{0}, g_library{0};

/// The op run by its CPU kernel on host copies of the operands, the results copied to
/// `device`.
std::vector<Tensor> on_host(Op op, std::span<const Tensor> inputs, const Attrs& attrs,
                            std::span<const TensorMeta> metas, Device device) {
  ++g_host_fallbacks;
  std::vector<Tensor> host;
  for (const Tensor& t : inputs)
    host.push_back(t.to(Device::cpu()));
  std::vector<Tensor> results;
  for (const TensorMeta& m : metas)
    results.push_back(make_tensor(m.sizes, m.dtype));
  schema(op).kernel(host, attrs, results);
  for (Tensor& r : results)
    r = r.to(device);
  return results;
}

/// A single-op graph compiled for CUDA, or the reason it runs on the host.
struct Compiled {
  std::unique_ptr<CompiledGraph> graph; // null: the op runs on the host
};

class Cache {
public:
  /// The compiled graph of op over these operands (built at the first call of a signature).
  const CompiledGraph* get(Op op, std::span<const Tensor> inputs, const Attrs& attrs,
                           Device device) {
    auto g = std::make_unique<ir::Graph>(std::string(op_name(op)));
    std::vector<ir::Value*> values;
    for (size_t k = 0; k < inputs.size(); ++k)
      values.push_back(g->add_input(ir::Type::from_meta(TensorMeta::of(inputs[k])),
                                    ir::InputKind::user, "x" + std::to_string(k)));
    ir::Builder b(*g);
    ir::Node* n = [&] {
      const FactoryDevice where(device); // a factory's node makes its tensor there
      return b.create_node(op, values, attrs);
    }();
    for (ir::Value* out : n->outputs())
      g->add_output(out);
    const std::string key = ir::print(*g);
    std::lock_guard lock(mu_);
    auto it = graphs_.find(key);
    if (it != graphs_.end()) return it->second.graph.get();
    ++g_compiled;
    LowerOptions lo;
    lo.target = &cuda_target(device.index);
    lo.eager_on_host = true; // these plans are the eager kernels
    Expected<CompiledGraph> cg = lower(std::move(g), lo);
    Compiled c;
    // What the CUDA target cannot compile (the interpreter's plan) runs on the host.
    if (cg && cg->fallback.empty()) c.graph = std::make_unique<CompiledGraph>(std::move(*cg));
    return graphs_.emplace(key, std::move(c)).first->second.graph.get();
  }

private:
  std::mutex mu_;
  std::map<std::string, Compiled> graphs_;
};

Cache& cache() {
  static Cache* c = new Cache(); // never destroyed: its modules outlive static tensors
  return *c;
}

/// Writes r into out (of r's sizes), both on `device`: a device copy when out is contiguous
/// and of r's dtype; a cast first when not; a strided out through the host.
void write_into(Tensor& out, Tensor r, Device device) {
  if (r.dtype() != out.dtype()) r = dispatch1(Op::cast, {r}, Attrs{out.dtype()});
  const size_t bytes = static_cast<size_t>(r.numel() * r.itemsize());
  if (bytes == 0) return;
  if (out.is_contiguous()) {
    kiln::cuda::detail::copy_on_device(out.raw_data(), r.raw_data(), bytes, device);
    return;
  }
  // The span of out's storage its elements cover, written on the host and copied back.
  int64_t span = 1;
  for (size_t d = 0; d < out.sizes().size(); ++d)
    span += (out.sizes()[d] - 1) * out.strides()[d];
  const size_t span_bytes = static_cast<size_t>(span * out.itemsize());
  Tensor host = make_tensor({span}, out.dtype());
  kiln::cuda::detail::copy_to_host(host.raw_data(), out.raw_data(), span_bytes, device);
  Tensor view = make_view(host, out.sizes(), out.strides(), 0);
  const Tensor src = r.to(Device::cpu());
  dispatch(Op::copy, std::span<const Tensor>(&src, 1), {}, std::span<Tensor>(&view, 1));
  kiln::cuda::detail::copy_to_device(out.raw_data(), host.raw_data(), span_bytes, device);
}

bool shares_storage_with(const Tensor& r, std::span<const Tensor> inputs) {
  return std::any_of(inputs.begin(), inputs.end(),
                     [&](const Tensor& t) { return shares_storage(t, r); });
}

bool is_out(const Tensor& r, std::span<Tensor> out) {
  return std::any_of(out.begin(), out.end(), [&](const Tensor& o) { return same_view(r, o); });
}

/// Whether op's kernel may write its result straight into `out`: out overlaps no operand,
/// or op is pointwise and each operand it overlaps is out itself (element i is read before
/// it is written, by the same thread). The plan still writes it only when it is contiguous
/// and of the result's dtype (Plan::run's `into`).
bool writable_in_place(Op op, const Tensor& out, std::span<const Tensor> inputs) {
  for (const Tensor& t : inputs)
    if (shares_storage(t, out) && !(schema(op).kind == OpKind::pointwise && same_view(t, out)))
      return false;
  return true;
}

std::vector<Tensor> run_op(Op op, std::span<const Tensor> inputs, const Attrs& attrs,
                           std::span<const TensorMeta> metas, std::span<Tensor> out) {
  TracerScope untraced(nullptr);
  if (op == Op::copy && out.size() == 1 && inputs.size() == 1 &&
      inputs[0].device() != out[0].device()) {
    // copy_ across devices: the source moves to the destination's device first.
    const Tensor src = inputs[0].to(out[0].device());
    return dispatch(op, std::span<const Tensor>(&src, 1), attrs, out);
  }
  // What runs below on the host (the pipeline's constant folding, host steps) makes its
  // tensors there.
  const FactoryDevice host(Device::cpu());
  Device device = Device::cpu();
  for (const TensorMeta& m : metas)
    if (!m.device.is_cpu()) device = m.device;
  for (const Tensor& t : out)
    if (!t.device().is_cpu()) device = t.device();
  for (const Tensor& t : inputs)
    if (!t.device().is_cpu()) device = t.device();
  kiln::cuda::detail::ensure_backend();
  std::vector<Tensor> on_device;
  for (const Tensor& t : inputs) {
    KILN_CHECK(t.device() == device || t.dim() == 0, op_name(op), ": operands on two devices (",
               t.device(), " and ", device, ")");
    on_device.push_back(t.to(device));
  }
  for (const Tensor& t : out)
    KILN_CHECK(t.device() == device, op_name(op), ": an out= tensor on ", t.device(),
               " for a result on ", device);
  // A copy between two contiguous tensors of one dtype (apart) is the device's own copy.
  if (op == Op::copy && out.size() == 1 && on_device[0].device() == device &&
      !shares_storage_with(out[0], std::span<const Tensor>(on_device.data(), 1)) &&
      on_device[0].dtype() == out[0].dtype() && on_device[0].sizes() == out[0].sizes() &&
      on_device[0].is_contiguous() && out[0].is_contiguous()) {
    const size_t bytes = static_cast<size_t>(out[0].numel() * out[0].itemsize());
    if (bytes > 0)
      kiln::cuda::detail::copy_on_device(out[0].raw_data(), on_device[0].raw_data(), bytes, device);
    out[0].impl().storage->bump_version();
    return {out[0]};
  }
  std::vector<Tensor> results;
  size_t fused = 0;
  std::optional<Tensor> blas;
  std::optional<std::vector<Tensor>> library;
  if (op == Op::matmul &&
      (blas = kiln::cuda::blas_matmul(on_device[0], on_device[1], {}, {}, &fused))) {
    results = {std::move(*blas)};
  } else if (!op_traits(op).lowerable &&
             (library = run_library_op(op, on_device, attrs, metas, device))) {
    ++g_library;
    results = std::move(*library);
  } else if (schema(op).kind == OpKind::random) {
    results = on_host(op, on_device, attrs, metas, device);
  } else if (const CompiledGraph* cg = cache().get(op, on_device, attrs, device)) {
    if (!cg->plan.host_steps().empty()) ++g_host_fallbacks; // a library call, for now
    // An out= tensor the kernel may write itself (no copy after).
    std::vector<Tensor> into;
    for (const Tensor& o : out)
      into.push_back(writable_in_place(op, o, on_device) ? o : Tensor());
    results = cg->plan.run(on_device, into);
    // A result the pipeline left an operand (an identity) is still a fresh tensor.
    for (Tensor& r : results)
      if (!is_out(r, out) && shares_storage_with(r, on_device)) {
        Tensor fresh = make_tensor(r.sizes(), r.dtype(), device);
        write_into(fresh, r, device);
        r = fresh;
      }
  } else {
    results = on_host(op, on_device, attrs, metas, device);
  }
  if (out.empty()) return results;
  KILN_CHECK(out.size() == results.size(), op_name(op), ": ", out.size(), " out= tensors for ",
             results.size(), " results");
  for (size_t k = 0; k < out.size(); ++k) {
    check_out(schema(op), results[k].sizes(), results[k].dtype(), out[k]);
    if (!same_view(results[k], out[k])) write_into(out[k], results[k], device);
    out[k].impl().storage->bump_version();
  }
  return std::vector<Tensor>(out.begin(), out.end());
}

/// run_op, with a device failure (a launch, a copy, cuBLASLt) named by the op and its operands
/// and reported at the user's call site.
std::vector<Tensor> run(Op op, std::span<const Tensor> inputs, const Attrs& attrs,
                        std::span<const TensorMeta> metas, std::span<Tensor> out) {
  try {
    return run_op(op, inputs, attrs, metas, out);
  } catch (const Error& e) {
    const std::string name(op_name(op));
    if (e.message().rfind(name + ":", 0) == 0) throw; // it names the op already
    std::string operands;
    for (const Tensor& t : inputs)
      operands += (operands.empty() ? "" : ", ") + std::string(dtype_name(t.dtype())) +
                  shape_str(t.sizes()) + "@" + t.device().str();
    throw Error(name + " (" + operands + "): " + e.message());
  }
}

const bool g_registered = [] {
  register_device_kernels(DeviceType::cuda, &run);
  return true;
}();

} // namespace

EagerCounters eager_counters() {
  (void)g_registered;
  return {g_compiled.load(), g_host_fallbacks.load(), g_library.load()};
}

} // namespace kiln::codegen::cuda
