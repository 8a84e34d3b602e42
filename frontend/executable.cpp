// Builds the runtime Plan of a graph: with code generation, fusion groups become generated
// kernels and the other nodes eager calls; without it (the interpreter), every node is an
// eager call of its op through dispatch.
#include "frontend/executable.h"

#include <unordered_map>

#include "codegen/generate.h"
#include "passes/fusion.h"
#include "runtime/error.h"

namespace kiln::frontend {

Executable::~Executable() = default;

Executable::Executable(std::unique_ptr<ir::Graph> graph, std::vector<size_t> input_map,
                       bool generate_code, std::string* log,
                       const codegen::ScheduleOverride& schedule)
    : graph_(std::move(graph)) {
  std::unordered_map<const ir::Value*, size_t> slot;
  size_t num_slots = 0;
  auto slot_of = [&](const ir::Value* v) {
    auto [it, fresh] = slot.try_emplace(v, num_slots);
    if (fresh) ++num_slots;
    return it->second;
  };
  KILN_ASSERT(input_map.size() == graph_->num_inputs(), "input map of ", input_map.size(),
              " entries for ", graph_->num_inputs(), " inputs");
  auto bind_inputs = [&] {
    for (size_t i = 0; i < graph_->num_inputs(); ++i) {
      const ir::Value* in = graph_->input(i);
      size_t s = slot_of(in);
      if (in->is_constant()) {
        // The kernels see a wrapped number as such (it changes type promotion).
        auto impl = std::make_shared<TensorImpl>(in->constant().impl());
        impl->wrapped_number = in->type().wrapped_number();
        plan_.bind_constant(s, Tensor(std::move(impl)));
      } else {
        plan_.bind_input(s, input_map[i]);
      }
    }
  };
  bind_inputs();
  auto node_step = [&](const ir::Node* n) {
    Plan::Step st;
    st.op = n->op();
    st.attrs = &n->attrs();
    for (ir::Value* v : n->inputs())
      st.operands.push_back(slot_of(v));
    for (ir::Value* v : n->outputs())
      st.results.push_back(slot_of(v));
    if (n->schema().kind != OpKind::view) ++kernels_;
    plan_.add_step(std::move(st));
  };
  bool generated = false;
  if (generate_code) {
    try {
      passes::FusionResult fusion = passes::fuse(*graph_);
      if (log)
        for (const std::string& line : fusion.log)
          *log += line + "\n";
      codegen::GeneratedCode code = codegen::generate(fusion, true, schedule);
      library_ = code.library;
      cache_hit_ = code.cache_hit;
      for (const passes::FusionStep& fs : fusion.order) {
        if (fs.library >= 0) {
          const passes::LibraryCall& call = fusion.library_calls[static_cast<size_t>(fs.library)];
          epilogues_.push_back(std::make_unique<Epilogue>(call.epilogue));
          Plan::Step st;
          st.op = call.anchor->op();
          st.attrs = &call.anchor->attrs();
          st.epilogue = epilogues_.back().get();
          for (const ir::Value* v : call.operands)
            st.operands.push_back(slot_of(v));
          st.results.push_back(slot_of(call.output));
          kernel_texts_.push_back("library " + std::string(op_name(st.op)) + " + " +
                                  call.epilogue.str() + "\n");
          ++kernels_;
          plan_.add_step(std::move(st));
          continue;
        }
        if (fs.group < 0) {
          node_step(fs.node);
          continue;
        }
        const codegen::GeneratedKernel& gk = code.kernels[static_cast<size_t>(fs.group)];
        Plan::KernelCall call;
        call.entry = gk.entry;
        call.rows = gk.rows;
        call.grain = gk.schedule.grain;
        call.threads = gk.schedule.threads;
        Plan::Step st;
        std::vector<std::pair<size_t, int>> results, operands; // step index, kernel buffer
        for (size_t b = 0; b < gk.buffers.size(); ++b) {
          (gk.kernel.buffers[b].output ? results : operands)
              .push_back({gk.kernel.buffers[b].output ? st.results.size() : st.operands.size(),
                          static_cast<int>(b)});
          if (gk.kernel.buffers[b].output) {
            const ir::Type& type = gk.buffers[b]->type();
            KILN_ASSERT(type.is_contiguous(),
                        "a generated kernel's output is strided: ", type.str());
            st.results.push_back(slot_of(gk.buffers[b]));
            call.outputs.push_back(
                {std::vector<int64_t>(type.sizes().begin(), type.sizes().end()), type.dtype()});
          } else {
            st.operands.push_back(slot_of(gk.buffers[b]));
          }
        }
        for (auto [r, rb] : results)
          for (auto [o, ob] : operands)
            if (gk.kernel.may_write_over(rb, ob)) st.may_reuse.push_back({r, o});
        kernel_texts_.push_back("schedule " + gk.schedule.str() + "\n" + gk.kernel.str());
        st.kernel = plan_.add_kernel(std::move(call));
        ++kernels_;
        plan_.add_step(std::move(st));
      }
      generated = true;
    } catch (const Error& e) {
      if (log)
        *log += std::string("code generation failed, the graph runs on the interpreter: ") +
                e.what() + "\n";
      plan_ = Plan();
      kernel_texts_.clear();
      epilogues_.clear();
      library_.reset();
      kernels_ = 0;
      bind_inputs(); // on the fresh plan
    }
  }
  if (!generated)
    for (ir::Node* n : graph_->nodes())
      node_step(n);
  for (ir::Value* v : graph_->outputs())
    plan_.add_output(slot_of(v));
  for (const ir::InPlaceWrite& w : graph_->writes()) {
    plan_.add_write(slot_of(w.target), slot_of(w.source));
    ++kernels_;
  }
  plan_.finish(num_slots);
  if (log && generated) *log += "memory " + plan_.memory_plan().str() + "\n";
}

int64_t Executable::generated_kernels() const {
  return static_cast<int64_t>(plan_.kernels().size());
}

std::string Executable::kernels_text() const {
  std::string s;
  for (const std::string& t : kernel_texts_)
    s += t;
  return s;
}

std::vector<Tensor> Executable::run(std::span<const Tensor> inputs) const {
  return plan_.run(inputs);
}

} // namespace kiln::frontend
