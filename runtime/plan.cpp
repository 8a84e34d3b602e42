// The Plan executor.
#include "runtime/plan.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "runtime/attention.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/parallel.h"
#include "runtime/tracing.h"

namespace kiln {
namespace {

void run_kernel(const Plan::KernelCall& k, std::span<const Tensor> operands,
                std::span<const size_t> results, const std::vector<Tensor>& slots) {
  std::vector<char*> buffers;
  buffers.reserve(operands.size() + results.size());
  for (const Tensor& t : operands)
    buffers.push_back(t.numel() == 0 ? nullptr : static_cast<char*>(t.raw_data()));
  // An empty output has no iterations of its own; the kernel still runs for the others (a
  // sum over an empty extent stores its identity beside an empty pointwise result).
  bool empty = true;
  for (size_t s : results) {
    const Tensor& out = slots[s];
    empty = empty && out.numel() == 0;
    buffers.push_back(out.numel() == 0 ? nullptr : static_cast<char*>(out.raw_data()));
  }
  if (k.rows == 0 || empty) return;
  k.run(buffers.data());
}

} // namespace

Tensor empty_with_layout(IntList sizes, IntList strides, DType dtype, Device device) {
  // make_tensor rather than kiln::empty: the geometry is known, so nothing is inferred.
  Tensor t = make_tensor(sizes, dtype, device);
  if (strides.empty()) return t;
  KILN_ASSERT(is_dense(sizes, strides), "empty_with_layout: strides ", shape_str(strides),
              " of sizes ", shape_str(sizes), " are not dense");
  return make_view(t, sizes, strides, 0); // a dense layout fills the same numel elements
}

std::string mib_str(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

void Plan::KernelCall::run(char* const* buffers) const {
  if (launch) {
    launch(buffers);
    return;
  }
  if (rows <= grain || in_parallel_region()) {
    entry(buffers, 0, rows);
    return;
  }
  KernelEntry e = entry;
  parallel_for(
      0, rows, grain, [e, buffers](int64_t b, int64_t end) { e(buffers, b, end); }, threads);
}

void Plan::bind_constant(size_t slot, Tensor value) {
  constants_.emplace_back(slot, std::move(value));
}

void Plan::bind_input(size_t slot, size_t index) { inputs_.emplace_back(slot, index); }

int Plan::add_kernel(KernelCall call) {
  KILN_CHECK(call.entry != nullptr, "plan: a kernel without an entry");
  kernels_.push_back(std::move(call));
  return static_cast<int>(kernels_.size() - 1);
}

void Plan::add_step(Step step) {
  if (step.kernel >= 0) {
    const KernelCall& k = kernels_.at(static_cast<size_t>(step.kernel));
    KILN_CHECK(k.outputs.size() == step.results.size(), "plan: kernel ", step.kernel, " has ",
               k.outputs.size(), " outputs, its step ", step.results.size(), " results");
  } else {
    KILN_CHECK(step.attrs != nullptr, "plan: an eager step of ", op_name(step.op),
               " without attributes");
  }
  steps_.push_back(std::move(step));
}

void Plan::finish(size_t num_slots) {
  num_slots_ = num_slots;
  std::unordered_map<size_t, size_t> last_read; // slot -> step
  for (size_t k = 0; k < steps_.size(); ++k) {
    steps_[k].release.clear();
    for (size_t s : steps_[k].operands)
      last_read[s] = k;
  }
  // Outputs and write operands stay to the end; everything else goes after its last read.
  std::vector<bool> keep(num_slots_, false);
  for (size_t s : outputs_)
    keep.at(s) = true;
  for (const Write& w : writes_)
    keep.at(w.target) = keep.at(w.source) = true;
  for (auto [s, step] : last_read)
    if (!keep.at(s)) steps_[step].release.push_back(s);
  for (Step& st : steps_)
    std::sort(st.release.begin(), st.release.end());
  placement_.assign(num_slots_, Placement{});
  memory_ = MemoryPlan{};
}

std::string Plan::MemoryPlan::str() const {
  return "arena " + mib_str(arena_bytes) + " for " + std::to_string(buffers) + " buffers of " +
         mib_str(planned_bytes) + " (" + std::to_string(in_place) + " in place)";
}

void Plan::set_memory(std::vector<Placement> placement, MemoryPlan summary) {
  KILN_CHECK(placement.size() == num_slots_, "plan: a memory plan of ", placement.size(),
             " slots for ", num_slots_);
  placement_ = std::move(placement);
  memory_ = std::move(summary);
}

void Plan::run_on(Device device, std::span<const std::pair<std::string, DeviceLaunch>> launches,
                  bool eager_on_host) {
  device_ = device;
  eager_on_host_ = eager_on_host;
  for (KernelCall& k : kernels_) {
    auto it = std::find_if(launches.begin(), launches.end(),
                           [&](const auto& l) { return l.first == k.name; });
    KILN_CHECK(it != launches.end(), "plan: kernel ", k.name, " has no launch on ", device);
    k.launch = it->second;
  }
  for (auto& [slot, t] : constants_)
    t = t.to(device);
  host_steps_.clear();
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step& st = steps_[k];
    KILN_CHECK(st.attention == nullptr, "plan: attention steps do not run on ", device);
    if (st.kernel < 0 && eager_on_host &&
        (st.epilogue != nullptr || schema(st.op).kind != OpKind::view))
      host_steps_.push_back("step " + std::to_string(k) + ": " + std::string(op_name(st.op)) +
                            (st.epilogue != nullptr ? " + " + st.epilogue->str() : ""));
  }
}

Tensor Plan::placed(size_t slot, const std::shared_ptr<Storage>& arena) const {
  const Placement& p = placement_[slot];
  if (p.nbytes == 0 || !arena) return empty_with_layout(p.sizes, p.strides, p.dtype, device_);
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = p.sizes;
  impl->strides = p.strides.empty() ? contiguous_strides(p.sizes) : p.strides;
  impl->offset = static_cast<int64_t>(p.offset) / itemsize(p.dtype);
  impl->dtype = p.dtype;
  impl->device = device_;
  impl->storage = arena;
  return Tensor(std::move(impl));
}

void Plan::set_in_place_writes(std::vector<std::pair<size_t, size_t>> source_target) {
  in_place_ = std::move(source_target);
  into_input_.assign(num_slots_, -1);
  for (auto [source, target] : in_place_)
    into_input_.at(source) = static_cast<int64_t>(target);
}

bool Plan::holds_result(const Tensor& t, IntList sizes, IntList strides, DType dtype) {
  return t.defined() && t.dtype() == dtype && t.sizes() == Shape(sizes.begin(), sizes.end()) &&
         t.is_contiguous() && (strides.empty() || is_contiguous(sizes, strides));
}

std::vector<Tensor> Plan::run(std::span<const Tensor> inputs, std::span<const Tensor> into) const {
  TracerScope untraced(nullptr);
  std::vector<Tensor> slots(num_slots_);
  // Per slot, the caller's buffer its result may be written into (output slots only).
  std::vector<const Tensor*> target;
  if (!into.empty()) {
    target.assign(num_slots_, nullptr);
    for (size_t k = 0; k < outputs_.size() && k < into.size(); ++k)
      if (into[k].defined() && target[outputs_[k]] == nullptr) target[outputs_[k]] = &into[k];
  }
  const auto fits = &Plan::holds_result;
  // A fresh result of these sizes, strides and dtype for slot s: the caller's buffer when it
  // has that geometry, else a new tensor.
  auto fresh = [&](size_t s, IntList sizes, IntList strides, DType dtype) {
    const Tensor* t = target.empty() ? nullptr : target[s];
    if (t != nullptr && fits(*t, sizes, strides, dtype)) return *t;
    return empty_with_layout(sizes, strides, dtype, device_);
  };
  const bool on_device = !device_.is_cpu();
  // On a device, a step without device code runs on host copies of its operands.
  std::vector<Tensor> host_operands;
  auto to_host = [&](std::span<const Tensor> ts) {
    host_operands.clear();
    for (const Tensor& t : ts)
      host_operands.push_back(t.defined() ? t.to(Device::cpu()) : t);
    return std::span<const Tensor>(host_operands);
  };
  for (const auto& [s, t] : constants_)
    slots[s] = t;
  // CPU scalars moved to the device, (slot, input): a write to one lands in the caller's.
  std::vector<std::pair<size_t, size_t>> moved;
  for (auto [s, k] : inputs_) {
    KILN_CHECK(k < inputs.size() && inputs[k].defined(), "plan: input ", k,
               " of a compiled graph is unbound (", inputs.size(), " given)");
    if (inputs[k].device() != device_ && inputs[k].dim() == 0) { // a CPU scalar moves
      slots[s] = inputs[k].to(device_);
      moved.emplace_back(s, k);
      continue;
    }
    KILN_CHECK(inputs[k].device() == device_, "plan: input ", k, " is on ", inputs[k].device(),
               ", the compiled graph runs on ", device_);
    slots[s] = inputs[k];
  }
  // One block for every planned buffer of this run (runs may overlap on other threads).
  std::shared_ptr<Storage> arena;
  if (memory_.arena_bytes > 0) arena = std::make_shared<Storage>(memory_.arena_bytes, device_);
  std::vector<Tensor> operands;
  for (const Step& st : steps_) {
    operands.clear();
    for (size_t s : st.operands)
      operands.push_back(slots[s]);
    if (st.attention) {
      const Epilogue& ep = st.attention->out;
      Tensor out = placement_[st.results[0]].planned
                       ? placed(st.results[0], arena)
                       : fresh(st.results[0], ep.sizes, ep.strides, ep.dtype);
      st.attention->run(kernels_.at(static_cast<size_t>(st.attention->kernel)), operands, out);
      slots[st.results[0]] = std::move(out);
    } else if (st.kernel >= 0) {
      const KernelCall& k = kernels_[static_cast<size_t>(st.kernel)];
      for (size_t i = 0; i < st.results.size(); ++i) {
        const size_t r = st.results[i];
        const auto& o = k.outputs[i];
        const int64_t in = in_place_target(r);
        if (in >= 0 && fits(slots[static_cast<size_t>(in)], o.sizes, o.strides, o.dtype))
          slots[r] = slots[static_cast<size_t>(in)]; // a write computed in place
        else
          slots[r] =
              placement_[r].planned ? placed(r, arena) : fresh(r, o.sizes, o.strides, o.dtype);
      }
      run_kernel(k, operands, st.results, slots);
    } else if (on_device && eager_on_host_ &&
               (st.epilogue != nullptr || schema(st.op).kind != OpKind::view)) {
      const FactoryDevice host(Device::cpu()); // a factory among them makes its tensor there
      std::vector<Tensor> r = st.epilogue != nullptr
                                  ? std::vector<Tensor>{run_with_epilogue(
                                        st.op, *st.attrs, to_host(operands), *st.epilogue, nullptr)}
                                  : dispatch(st.op, to_host(operands), *st.attrs);
      for (size_t k = 0; k < st.results.size(); ++k)
        slots[st.results[k]] = r[k].to(device_);
    } else if (st.epilogue) {
      const Epilogue& ep = *st.epilogue;
      Tensor out = placement_[st.results[0]].planned ? placed(st.results[0], arena)
                   : !target.empty() && target[st.results[0]] != nullptr
                       ? fresh(st.results[0], ep.sizes, ep.strides, ep.dtype)
                       : Tensor();
      slots[st.results[0]] = run_with_epilogue(st.op, *st.attrs, operands, *st.epilogue,
                                               out.defined() ? &out : nullptr);
    } else if (const Tensor* t =
                   st.results.size() == 1 && !target.empty() ? target[st.results[0]] : nullptr;
               t != nullptr && schema(st.op).kind != OpKind::view) {
      // An eager call whose one result is an output: written into the caller's buffer (out=).
      Tensor into_t = *t;
      slots[st.results[0]] =
          std::move(dispatch(st.op, operands, *st.attrs, std::span<Tensor>(&into_t, 1))[0]);
    } else {
      // On a device, a factory makes its tensor there.
      const FactoryDevice where(device_);
      std::vector<Tensor> r = dispatch(st.op, operands, *st.attrs);
      for (size_t k = 0; k < st.results.size(); ++k)
        slots[st.results[k]] = std::move(r[k]);
    }
    for (size_t s : st.release)
      slots[s] = Tensor();
  }
  std::vector<Tensor> out;
  out.reserve(outputs_.size());
  for (size_t s : outputs_)
    out.push_back(slots[s]);
  apply_writes(slots);
  // A write to a moved scalar (a step count kept on the CPU) went to its device copy: it
  // goes on to the caller's tensor, or the next run would read the old value.
  for (const Write& w : writes_)
    for (auto [s, k] : moved)
      if (w.target == s) {
        Tensor target = inputs[k];
        target.copy_(slots[s].to(target.device()));
      }
  return out;
}

void Plan::apply_writes(std::span<const Tensor> slots) const {
  if (writes_.empty()) return;
  // Every write reads the value its source had when the graph ended: a source that shares
  // storage with a target (an input written here) is copied before any write lands.
  std::vector<Tensor> sources;
  for (const Write& w : writes_) {
    Tensor src = slots[w.source];
    if (same_view(src, slots[w.target])) { // computed in place: nothing to copy
      sources.emplace_back();
      continue;
    }
    const auto& storage = src.impl().storage;
    bool aliases_a_target = std::any_of(writes_.begin(), writes_.end(), [&](const Write& o) {
      return storage != nullptr && storage == slots[o.target].impl().storage;
    });
    if (aliases_a_target) src = dispatch1(Op::copy, {src});
    sources.push_back(std::move(src));
  }
  for (size_t k = 0; k < writes_.size(); ++k) {
    Tensor target = slots[writes_[k].target];
    if (!sources[k].defined()) {
      target.impl().storage->bump_version(); // written, as by the copy
      continue;
    }
    dispatch(Op::copy, std::span<const Tensor>(&sources[k], 1), {}, std::span<Tensor>(&target, 1));
  }
}

} // namespace kiln
