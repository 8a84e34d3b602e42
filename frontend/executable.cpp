// The interpreter: each node is one call of the op's eager kernel through dispatch, with
// tracing suspended; values live in slots that are released after their last read.
#include "frontend/executable.h"

#include <algorithm>
#include <unordered_map>

#include "runtime/error.h"
#include "runtime/ops/dispatch.h"
#include "runtime/tracing.h"

namespace kiln::frontend {

Executable::Executable(std::unique_ptr<ir::Graph> graph, std::vector<size_t> input_map)
    : graph_(std::move(graph)), input_map_(std::move(input_map)) {
  std::unordered_map<const ir::Value*, size_t> slot;
  auto slot_of = [&](const ir::Value* v) {
    auto [it, fresh] = slot.try_emplace(v, num_slots_);
    if (fresh) ++num_slots_;
    return it->second;
  };
  KILN_ASSERT(input_map_.size() == graph_->num_inputs(), "input map of ", input_map_.size(),
              " entries for ", graph_->num_inputs(), " inputs");
  for (size_t i = 0; i < graph_->num_inputs(); ++i) {
    const ir::Value* in = graph_->input(i);
    size_t s = slot_of(in);
    if (in->is_constant()) {
      // The kernels see a wrapped number as such (it changes type promotion).
      auto impl = std::make_shared<TensorImpl>(in->constant().impl());
      impl->wrapped_number = in->type().wrapped_number();
      constants_.emplace_back(s, Tensor(std::move(impl)));
    } else {
      inputs_.emplace_back(s, input_map_[i]);
    }
  }
  std::unordered_map<size_t, size_t> last_read; // slot -> step
  for (ir::Node* n : graph_->nodes()) {
    Step st{n->op(), &n->attrs(), {}, {}, {}};
    for (ir::Value* v : n->inputs()) {
      st.operands.push_back(slot_of(v));
      last_read[st.operands.back()] = steps_.size();
    }
    for (ir::Value* v : n->outputs())
      st.results.push_back(slot_of(v));
    if (n->schema().kind != OpKind::view) ++kernels_;
    steps_.push_back(std::move(st));
  }
  for (ir::Value* v : graph_->outputs())
    outputs_.push_back(slot_of(v));
  for (const ir::InPlaceWrite& w : graph_->writes()) {
    writes_.emplace_back(slot_of(w.target), slot_of(w.source));
    ++kernels_;
  }
  // Outputs and write sources stay to the end; everything else goes after its last read.
  std::vector<bool> keep(num_slots_, false);
  for (size_t s : outputs_)
    keep[s] = true;
  for (auto [t, s] : writes_)
    keep[t] = keep[s] = true;
  for (auto [s, step] : last_read)
    if (!keep[s]) steps_[step].release.push_back(s);
}

std::vector<Tensor> Executable::run(std::span<const Tensor> inputs) const {
  TracerScope untraced(nullptr);
  std::vector<Tensor> slots(num_slots_);
  for (const auto& [s, t] : constants_)
    slots[s] = t;
  for (auto [s, k] : inputs_) {
    KILN_ASSERT(k < inputs.size() && inputs[k].defined(), "input ", k,
                " of a compiled graph is unbound");
    slots[s] = inputs[k];
  }
  std::vector<Tensor> operands;
  for (const Step& st : steps_) {
    operands.clear();
    for (size_t s : st.operands)
      operands.push_back(slots[s]);
    std::vector<Tensor> r = dispatch(st.op, operands, *st.attrs);
    for (size_t k = 0; k < st.results.size(); ++k)
      slots[st.results[k]] = std::move(r[k]);
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
    for (auto [t, s] : writes_) {
      Tensor src = slots[s];
      const auto& storage = src.impl().storage;
      bool aliases_a_target = std::any_of(writes_.begin(), writes_.end(), [&](const auto& w) {
        return storage != nullptr && storage == slots[w.first].impl().storage;
      });
      if (aliases_a_target) src = dispatch1(Op::copy, {src});
      sources.push_back(std::move(src));
    }
    for (size_t k = 0; k < writes_.size(); ++k) {
      Tensor target = slots[writes_[k].first];
      dispatch(Op::copy, std::span<const Tensor>(&sources[k], 1), {},
               std::span<Tensor>(&target, 1));
    }
  }
  return out;
}

} // namespace kiln::frontend
