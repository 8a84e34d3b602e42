// The interpreter: each node is one call of the op's eager kernel through dispatch, with
// tracing suspended; values live in slots that are released after their last read.
#include "frontend/executable.h"

#include <algorithm>
#include <unordered_map>

#include "codegen/generate.h"
#include "passes/fusion.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/parallel.h"
#include "runtime/tracing.h"

namespace kiln::frontend {
namespace {

template <typename G>
void run_kernel(const G& g, std::span<const Tensor> operands, std::span<const size_t> results,
                std::vector<Tensor>& slots) {
  std::vector<char*> buffers;
  buffers.reserve(operands.size() + results.size());
  bool empty = g.rows == 0;
  for (const Tensor& t : operands)
    buffers.push_back(t.numel() == 0 ? nullptr : static_cast<char*>(t.raw_data()));
  for (size_t k = 0; k < results.size(); ++k) {
    const ir::Type& type = g.output_types[k];
    KILN_ASSERT(type.is_contiguous(), "a generated kernel's output is strided: ", type.str());
    Tensor out = kiln::empty(type.sizes(), type.dtype());
    empty = empty || out.numel() == 0;
    buffers.push_back(out.numel() == 0 ? nullptr : static_cast<char*>(out.raw_data()));
    slots[results[k]] = std::move(out);
  }
  if (empty) return;
  codegen::cpu::KernelEntry entry = g.entry;
  char* const* args = buffers.data();
  if (g.rows <= g.grain || in_parallel_region()) {
    entry(args, 0, g.rows);
    return;
  }
  parallel_for(0, g.rows, g.grain, [&](int64_t b, int64_t e) { entry(args, b, e); });
}

} // namespace

struct Executable::Generated {
  codegen::cpu::KernelEntry entry = nullptr;
  int64_t rows = 0;
  int64_t grain = 1;
  size_t num_inputs = 0;
  std::vector<ir::Type> output_types;
  std::string text;
};

Executable::~Executable() = default;

Executable::Executable(std::unique_ptr<ir::Graph> graph, std::vector<size_t> input_map,
                       bool generate_code, std::string* log)
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
  auto node_step = [&](const ir::Node* n) {
    Step st;
    st.op = n->op();
    st.attrs = &n->attrs();
    for (ir::Value* v : n->inputs())
      st.operands.push_back(slot_of(v));
    for (ir::Value* v : n->outputs())
      st.results.push_back(slot_of(v));
    if (n->schema().kind != OpKind::view) ++kernels_;
    steps_.push_back(std::move(st));
  };
  bool generated = false;
  if (generate_code) {
    try {
      passes::FusionResult fusion = passes::fuse(*graph_);
      if (log)
        for (const std::string& line : fusion.log)
          *log += line + "\n";
      codegen::GeneratedCode code = codegen::generate(fusion);
      library_ = code.library;
      cache_hit_ = code.cache_hit;
      for (const passes::FusionStep& fs : fusion.order) {
        if (fs.group < 0) {
          node_step(fs.node);
          continue;
        }
        const codegen::GeneratedKernel& gk = code.kernels[static_cast<size_t>(fs.group)];
        Generated g;
        g.entry = gk.entry;
        g.rows = gk.rows;
        g.grain = gk.schedule.grain;
        g.text = "schedule " + gk.schedule.str() + "\n" + gk.kernel.str();
        Step st;
        st.kernel = static_cast<int>(generated_.size());
        for (size_t b = 0; b < gk.buffers.size(); ++b) {
          if (gk.kernel.buffers[b].output) {
            st.results.push_back(slot_of(gk.buffers[b]));
            g.output_types.push_back(gk.buffers[b]->type());
          } else {
            st.operands.push_back(slot_of(gk.buffers[b]));
            ++g.num_inputs;
          }
        }
        generated_.push_back(std::move(g));
        ++kernels_;
        steps_.push_back(std::move(st));
      }
      generated = true;
    } catch (const Error& e) {
      if (log)
        *log += std::string("code generation failed, the graph runs on the interpreter: ") +
                e.what() + "\n";
      steps_.clear();
      generated_.clear();
      library_.reset();
      kernels_ = 0;
    }
  }
  if (!generated)
    for (ir::Node* n : graph_->nodes())
      node_step(n);
  std::unordered_map<size_t, size_t> last_read; // slot -> step
  for (size_t k = 0; k < steps_.size(); ++k)
    for (size_t s : steps_[k].operands)
      last_read[s] = k;
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

int64_t Executable::generated_kernels() const { return static_cast<int64_t>(generated_.size()); }

std::string Executable::kernels_text() const {
  std::string s;
  for (const Generated& g : generated_)
    s += g.text;
  return s;
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
    if (st.kernel >= 0) {
      run_kernel(generated_[static_cast<size_t>(st.kernel)], operands, st.results, slots);
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
