// Plans: graph values become slots, nodes, kernels and library calls become steps.
#include "codegen/build_plan.h"

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "codegen/memory_plan.h"
#include "runtime/attention.h"
#include "runtime/error.h"

namespace kiln::codegen {

Plan::KernelCall kernel_call(const LoweredGroup& lg, const Schedule& schedule, KernelEntry entry) {
  Plan::KernelCall call;
  call.entry = entry;
  call.name = lg.kernel.name;
  call.rows = schedule.rows(lg.kernel);
  call.grain = schedule.grain;
  call.threads = schedule.threads;
  for (size_t b = 0; b < lg.buffers.size(); ++b) {
    if (!lg.kernel.buffers[b].output) continue;
    const ir::Type& type = lg.buffers[b]->type();
    KILN_ASSERT(type.is_contiguous() || is_dense(type.sizes(), type.strides()),
                "a generated kernel's output is not dense: ", type.str());
    call.outputs.push_back({std::vector<int64_t>(type.sizes().begin(), type.sizes().end()),
                            type.dtype(),
                            std::vector<int64_t>(type.strides().begin(), type.strides().end())});
  }
  return call;
}

namespace {

class PlanBuilder {
public:
  PlanBuilder(CompiledGraph& cg, std::span<const size_t> input_map) : cg_(cg) {
    const ir::Graph& g = *cg.graph;
    KILN_ASSERT(input_map.size() == g.num_inputs(), "input map of ", input_map.size(),
                " entries for ", g.num_inputs(), " inputs");
    cg.plan = Plan();
    cg.launches = 0;
    for (size_t i = 0; i < g.num_inputs(); ++i) {
      const ir::Value* in = g.input(i);
      const size_t s = slot(in);
      if (in->is_constant()) {
        // The kernels see a wrapped number as such (it changes type promotion).
        auto impl = std::make_shared<TensorImpl>(in->constant().impl());
        impl->wrapped_number = in->type().wrapped_number();
        cg.plan.bind_constant(s, Tensor(std::move(impl)));
      } else {
        cg.plan.bind_input(s, input_map[i]);
      }
    }
  }

  size_t slot(const ir::Value* v) {
    auto [it, fresh] = slot_.try_emplace(v, slot_.size());
    return it->second;
  }

  /// An eager call of the node's op.
  void node(const ir::Node* n) {
    Plan::Step st;
    st.op = n->op();
    st.attrs = &n->attrs();
    for (ir::Value* v : n->inputs())
      st.operands.push_back(slot(v));
    for (ir::Value* v : n->outputs())
      st.results.push_back(slot(v));
    if (n->schema().kind != OpKind::view) ++cg_.launches;
    cg_.plan.add_step(std::move(st));
  }

  void library_call(const passes::LibraryCall& call) {
    cg_.epilogues.push_back(std::make_unique<Epilogue>(call.epilogue));
    Plan::Step st;
    st.op = call.anchor->op();
    st.attrs = &call.anchor->attrs();
    st.epilogue = cg_.epilogues.back().get();
    for (const ir::Value* v : call.operands)
      st.operands.push_back(slot(v));
    st.results.push_back(slot(call.output));
    ++cg_.launches;
    cg_.plan.add_step(std::move(st));
  }

  void kernel(const LoweredGroup& lg, const Schedule& schedule, KernelEntry entry) {
    Plan::KernelCall call = kernel_call(lg, schedule, entry);
    Plan::Step st;
    std::vector<std::pair<size_t, int>> results, operands; // step index, kernel buffer
    for (size_t b = 0; b < lg.buffers.size(); ++b) {
      const bool output = lg.kernel.buffers[b].output;
      (output ? results : operands)
          .push_back({output ? st.results.size() : st.operands.size(), static_cast<int>(b)});
      if (output) {
        st.results.push_back(slot(lg.buffers[b]));
      } else {
        st.operands.push_back(slot(lg.buffers[b]));
      }
    }
    for (auto [r, rb] : results)
      for (auto [o, ob] : operands)
        if (lg.kernel.may_write_over(rb, ob)) st.may_reuse.push_back({r, o});
    st.kernel = cg_.plan.add_kernel(std::move(call));
    ++cg_.launches;
    cg_.plan.add_step(std::move(st));
  }

  /// An attention site as one step: its softmax kernel joins the plan's kernels, run by the
  /// step block by block.
  void attention(const AttentionSite& site, const passes::FusionResult& fusion,
                 const LoweredGroup& lg, std::span<const Schedule> schedules,
                 std::span<const KernelEntry> entries, size_t g) {
    const Schedule& schedule = schedules[g];
    const KernelEntry entry = entries[g];
    AttentionBuild built = make_attention_call(site, fusion, lg, schedules, entries);
    Plan::Step st;
    for (const ir::Value* v : built.operands)
      st.operands.push_back(slot(v));
    built.call->kernel = cg_.plan.add_kernel(kernel_call(lg, schedule, entry));
    st.results.push_back(slot(built.result));
    st.op = Op::matmul;
    st.attrs = &built.anchor->attrs();
    st.attention = built.call.get();
    cg_.attention.push_back(std::move(built.call));
    cg_.launches += 3;
    cg_.plan.add_step(std::move(st));
  }

  /// Outputs and in-place writes, the plan's own finish (releases), the memory plan.
  void finish() {
    const ir::Graph& g = *cg_.graph;
    for (ir::Value* v : g.outputs())
      cg_.plan.add_output(slot(v));
    for (const ir::InPlaceWrite& w : g.writes()) {
      cg_.plan.add_write(slot(w.target), slot(w.source));
      ++cg_.launches;
    }
    cg_.plan.finish(slot_.size());
    plan_memory(cg_.plan);
  }

private:
  CompiledGraph& cg_;
  std::unordered_map<const ir::Value*, size_t> slot_;
};

} // namespace

void build_interpreted_plan(CompiledGraph& cg, std::span<const size_t> input_map) {
  cg.epilogues.clear();
  cg.attention.clear();
  cg.code.reset();
  PlanBuilder b(cg, input_map);
  for (ir::Node* n : cg.graph->nodes())
    b.node(n);
  b.finish();
}

void build_fused_plan(CompiledGraph& cg, std::span<const size_t> input_map,
                      const passes::FusionResult& fusion, std::span<const LoweredGroup> groups,
                      std::span<const Schedule> schedules, std::span<const KernelEntry> entries,
                      std::span<const AttentionSite> attention, std::span<const int64_t> run_as) {
  PlanBuilder b(cg, input_map);
  cg.attention.clear();
  std::vector<const AttentionSite*> site_at(fusion.order.size(), nullptr);
  std::vector<bool> inside(fusion.order.size(), false);
  for (const AttentionSite& site : attention) {
    for (size_t k : {site.scores, site.softmax, site.out})
      KILN_ASSERT(!site_at[k] && !inside[k], "attention sites share step ", k);
    site_at[site.out] = &site;
    inside[site.scores] = inside[site.softmax] = true;
  }
  for (size_t k = 0; k < fusion.order.size(); ++k) {
    const passes::FusionStep& fs = fusion.order[k];
    if (inside[k]) continue;
    if (const AttentionSite* site = site_at[k]) {
      const auto g = static_cast<size_t>(fusion.order[site->softmax].group);
      b.attention(*site, fusion, groups[g], schedules, entries, g);
    } else if (fs.library >= 0) {
      b.library_call(fusion.library_calls[static_cast<size_t>(fs.library)]);
    } else if (fs.group >= 0) {
      const int64_t run = run_as.empty() ? fs.group : run_as[static_cast<size_t>(fs.group)];
      if (run < 0) continue; // a foreach's member: the foreach runs it
      const auto g = static_cast<size_t>(run);
      b.kernel(groups[g], schedules[g], entries[g]);
    } else {
      b.node(fs.node);
    }
  }
  b.finish();
}

} // namespace kiln::codegen
