// The Plan executor.
#include "runtime/plan.h"

#include <algorithm>
#include <unordered_map>

#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/parallel.h"
#include "runtime/tracing.h"

namespace kiln {
namespace {

void run_kernel(const Plan::KernelCall& k, std::span<const Tensor> operands,
                std::span<const size_t> results, std::vector<Tensor>& slots) {
  std::vector<char*> buffers;
  buffers.reserve(operands.size() + results.size());
  bool empty = k.rows == 0;
  for (const Tensor& t : operands)
    buffers.push_back(t.numel() == 0 ? nullptr : static_cast<char*>(t.raw_data()));
  for (size_t i = 0; i < results.size(); ++i) {
    const Plan::KernelCall::Output& o = k.outputs[i];
    Tensor out = kiln::empty(o.sizes, o.dtype);
    empty = empty || out.numel() == 0;
    buffers.push_back(out.numel() == 0 ? nullptr : static_cast<char*>(out.raw_data()));
    slots[results[i]] = std::move(out);
  }
  if (empty) return;
  KernelEntry entry = k.entry;
  char* const* args = buffers.data();
  if (k.rows <= k.grain || in_parallel_region()) {
    entry(args, 0, k.rows);
    return;
  }
  parallel_for(0, k.rows, k.grain, [&](int64_t b, int64_t e) { entry(args, b, e); });
}

} // namespace

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
}

std::vector<Tensor> Plan::run(std::span<const Tensor> inputs) const {
  TracerScope untraced(nullptr);
  std::vector<Tensor> slots(num_slots_);
  for (const auto& [s, t] : constants_)
    slots[s] = t;
  for (auto [s, k] : inputs_) {
    KILN_CHECK(k < inputs.size() && inputs[k].defined(), "plan: input ", k,
               " of a compiled graph is unbound (", inputs.size(), " given)");
    slots[s] = inputs[k];
  }
  std::vector<Tensor> operands;
  for (const Step& st : steps_) {
    operands.clear();
    for (size_t s : st.operands)
      operands.push_back(slots[s]);
    if (st.kernel >= 0) {
      run_kernel(kernels_[static_cast<size_t>(st.kernel)], operands, st.results, slots);
    } else if (st.epilogue) {
      slots[st.results[0]] = run_with_epilogue(st.op, *st.attrs, operands, *st.epilogue);
    } else {
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
  if (!writes_.empty()) {
    // Every write reads the value its source had when the graph ended: a source that shares
    // storage with a target (an input written here) is copied before any write lands.
    std::vector<Tensor> sources;
    for (const Write& w : writes_) {
      Tensor src = slots[w.source];
      const auto& storage = src.impl().storage;
      bool aliases_a_target = std::any_of(writes_.begin(), writes_.end(), [&](const Write& o) {
        return storage != nullptr && storage == slots[o.target].impl().storage;
      });
      if (aliases_a_target) src = dispatch1(Op::copy, {src});
      sources.push_back(std::move(src));
    }
    for (size_t k = 0; k < writes_.size(); ++k) {
      Tensor target = slots[writes_[k].target];
      dispatch(Op::copy, std::span<const Tensor>(&sources[k], 1), {},
               std::span<Tensor>(&target, 1));
    }
  }
  return out;
}

} // namespace kiln
