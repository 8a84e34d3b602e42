// The static plan: built by one recording run of the Plan, then run from prebuilt argument
// blocks (see static_plan.h).
#include "runtime/static_plan.h"

#include <chrono>
#include <cstdio>

#include "runtime/attention.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/tracing.h"

namespace kiln {
namespace {

char* address_of(const Tensor& t) {
  return t.numel() == 0 ? nullptr : static_cast<char*>(t.raw_data());
}

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t).count();
}

} // namespace

std::string StaticPlan::Summary::str() const {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%zu kernels, %zu prepared library calls, %zu views, %zu eager calls; arena "
                "%zu bytes, library scratch %zu bytes, static outputs %zu bytes",
                kernels, library_calls, views, eager_calls, arena_bytes, scratch_bytes,
                static_output_bytes);
  return buf;
}

StaticPlan::StaticPlan(const Plan& plan, Options options) : plan_(plan), options_(options) {}
StaticPlan::~StaticPlan() = default;

std::unique_ptr<StaticPlan> StaticPlan::build(const Plan& plan, std::span<const Tensor> inputs,
                                              Options options, std::vector<Tensor>& outputs) {
  TracerScope untraced(nullptr);
  std::unique_ptr<StaticPlan> sp(new StaticPlan(plan, options));
  StaticPlan& p = *sp;
  const size_t n = plan.num_slots();
  p.slots_.resize(n);
  p.address_.assign(n, nullptr);
  p.tensors_.resize(n);
  const size_t arena_bytes = plan.memory_plan().arena_bytes;
  if (arena_bytes > 0) p.arena_ = std::make_shared<Storage>(arena_bytes, Device::cpu());
  p.summary_.arena_bytes = arena_bytes;

  // The recording run: Plan::run's steps on Tensors, deciding each slot's source and each
  // step's kind as it goes (nothing is released: every slot's value is looked at once more).
  std::vector<Tensor>& t = p.tensors_;
  auto fix = [&](size_t s, Tensor value) {
    p.slots_[s].source = Source::fixed;
    p.slots_[s].fixed = value;
    t[s] = std::move(value);
  };
  for (const auto& [s, value] : plan.constants())
    fix(s, value);
  for (auto [s, k] : plan.inputs()) {
    KILN_CHECK(k < inputs.size() && inputs[k].defined(), "plan: input ", k,
               " of a compiled graph is unbound (", inputs.size(), " given)");
    p.slots_[s].source = Source::input;
    p.slots_[s].input = k;
    t[s] = inputs[k];
  }
  // A result of a kernel or library call: in the arena, a static output, or fresh per run.
  auto result = [&](size_t s, IntList sizes, IntList strides, DType dtype) {
    const Plan::Placement& pl = plan.placement(s);
    if (pl.planned && p.arena_) {
      fix(s, plan.placed(s, p.arena_));
    } else if (options.static_outputs) {
      // Unplanned results are the outputs and what outputs view: buffers of the plan.
      fix(s, empty_with_layout(sizes, strides, dtype));
      p.summary_.static_output_bytes += static_cast<size_t>(t[s].numel()) * itemsize(dtype);
    } else {
      p.slots_[s].source = Source::fresh;
      p.slots_[s].sizes = Shape(sizes.begin(), sizes.end());
      p.slots_[s].strides = Shape(strides.begin(), strides.end());
      p.slots_[s].dtype = dtype;
      t[s] = empty_with_layout(sizes, strides, dtype);
    }
  };
  // A matmul or convolution with no epilogue (an eager step) is a library call too: its
  // result is made as a kernel's is, and the call prepared with an empty epilogue. Null when
  // the op is not one, or the library does not take it (the step stays eager, its result
  // dispatch's).
  auto prepare_contraction =
      [&](const Plan::Step& st, std::span<const Tensor> in, const std::vector<Tensor>& dispatched,
          auto& make_result, std::vector<Tensor>& slots) -> std::unique_ptr<PreparedLibraryCall> {
    if ((st.op != Op::matmul && st.op != Op::conv2d) || dispatched.size() != 1 ||
        dispatched[0].dtype() != DType::f32)
      return nullptr;
    for (const Tensor& x : in)
      if (!x.defined() || x.dtype() != DType::f32) return nullptr;
    Epilogue none;
    none.contraction_operands = in.size();
    none.sizes = dispatched[0].sizes();
    none.dtype = DType::f32;
    const size_t r = st.results[0];
    make_result(r, none.sizes, IntList{}, DType::f32);
    std::unique_ptr<PreparedLibraryCall> lib =
        run_and_prepare(st.op, *st.attrs, in, none, slots[r]);
    if (!lib) p.slots_[r] = Slot{}; // the step stays eager: the view or tensor logic below
    return lib;
  };
  std::vector<Tensor> operands;
  for (const Plan::Step& st : plan.steps()) {
    Step step;
    step.step = &st;
    operands.clear();
    for (size_t s : st.operands)
      operands.push_back(t[s]);
    if (st.attention) {
      // Attention runs block by block on its own prepared calls: an eager step here.
      const Epilogue& ep = st.attention->out;
      result(st.results[0], ep.sizes, ep.strides, ep.dtype);
      st.attention->run(plan.kernels()[static_cast<size_t>(st.attention->kernel)], operands,
                        t[st.results[0]]);
      step.kind = Kind::eager;
      ++p.summary_.eager_calls;
    } else if (st.kernel >= 0) {
      const Plan::KernelCall& k = plan.kernels()[static_cast<size_t>(st.kernel)];
      bool empty = true;
      for (size_t i = 0; i < st.results.size(); ++i) {
        const size_t r = st.results[i];
        const auto& o = k.outputs[i];
        // A write computed in place (Plan::set_in_place_writes): the result is the target
        // input's buffer on every run, as the inputs keep this run's geometry.
        const int64_t in = plan.in_place_target(r);
        if (in >= 0 && p.slots_[static_cast<size_t>(in)].source == Source::input &&
            Plan::holds_result(t[static_cast<size_t>(in)], o.sizes, o.strides, o.dtype)) {
          p.slots_[r].source = Source::input;
          p.slots_[r].input = p.slots_[static_cast<size_t>(in)].input;
          p.in_place_.push_back(r);
          t[r] = t[static_cast<size_t>(in)];
        } else {
          result(r, o.sizes, o.strides, o.dtype);
        }
        empty = empty && t[r].numel() == 0;
      }
      step.kind = Kind::kernel;
      step.skip = k.rows == 0 || empty;
      step.buffers.resize(st.operands.size() + st.results.size());
      ++p.summary_.kernels;
    } else if (st.epilogue) {
      result(st.results[0], st.epilogue->sizes, st.epilogue->strides, st.epilogue->dtype);
      step.library = run_and_prepare(st.op, *st.attrs, operands, *st.epilogue, t[st.results[0]]);
      if (step.library) {
        step.kind = Kind::library;
        step.buffers.resize(st.operands.size() + 1);
        ++p.summary_.library_calls;
      } else {
        step.kind = Kind::eager;
        ++p.summary_.eager_calls;
      }
    } else if (std::vector<Tensor> r = dispatch(st.op, operands, *st.attrs);
               std::unique_ptr<PreparedLibraryCall> lib =
                   prepare_contraction(st, operands, r, result, t)) {
      step.library = std::move(lib);
      step.kind = Kind::library;
      step.buffers.resize(st.operands.size() + 1);
      ++p.summary_.library_calls;
    } else {
      const bool view = schema(st.op).kind == OpKind::view && r.size() == 1 &&
                        st.operands.size() == 1 && r[0].impl().storage != nullptr &&
                        r[0].impl().storage == operands[0].impl().storage;
      for (size_t i = 0; i < st.results.size(); ++i) {
        Slot& slot = p.slots_[st.results[i]];
        if (view && p.slots_[st.operands[0]].source == Source::fixed) {
          // A view of a buffer that never moves is fixed too.
          p.slots_[st.results[i]].source = Source::fixed;
          p.slots_[st.results[i]].fixed = r[0];
        } else if (view) {
          slot.source = Source::view;
          slot.base = st.operands[0];
          slot.delta =
              static_cast<char*>(r[0].raw_data()) - static_cast<char*>(operands[0].raw_data());
          slot.sizes = r[0].sizes();
          slot.strides = r[0].strides();
          slot.dtype = r[0].dtype();
        } else {
          slot.source = Source::tensor;
        }
        t[st.results[i]] = std::move(r[i]);
      }
      step.kind = view ? Kind::view : Kind::eager;
      ++(view ? p.summary_.views : p.summary_.eager_calls);
    }
    if (step.kind == Kind::kernel) {
      for (size_t i = 0; i < st.operands.size(); ++i)
        step.buffers[i] = address_of(t[st.operands[i]]);
      for (size_t i = 0; i < st.results.size(); ++i)
        step.buffers[st.operands.size() + i] = address_of(t[st.results[i]]);
      if (!step.skip) plan.kernels()[static_cast<size_t>(st.kernel)].run(step.buffers.data());
    }
    p.steps_.push_back(std::move(step));
  }
  outputs.clear();
  for (size_t s : plan.outputs())
    outputs.push_back(t[s]);
  plan.apply_writes(t);
  // An output that shares the arena (an eager step that returned a view of a planned buffer)
  // would be overwritten by the next run: such a plan keeps running as a Plan.
  for (const Tensor& o : outputs)
    if (p.arena_ && o.defined() && o.impl().storage == p.arena_) return nullptr;

  // Which slots need a Tensor on a run: outputs, writes, operands of eager steps, and the
  // bases of views that do.
  for (size_t s : plan.outputs())
    p.slots_[s].needs_tensor = true;
  for (const Plan::Write& w : plan.writes())
    p.slots_[w.target].needs_tensor = p.slots_[w.source].needs_tensor = true;
  for (const Step& s : p.steps_)
    if (s.kind == Kind::eager)
      for (size_t o : s.step->operands)
        p.slots_[o].needs_tensor = true;
  for (size_t k = p.steps_.size(); k-- > 0;) {
    const Step& s = p.steps_[k];
    if (s.kind == Kind::view && p.slots_[s.step->results[0]].needs_tensor)
      p.slots_[s.step->operands[0]].needs_tensor = true;
  }
  for (const Step& s : p.steps_)
    if (s.kind == Kind::view && p.slots_[s.step->results[0]].source == Source::view)
      p.slots_[s.step->operands[0]].viewed = true;
  for (size_t s = 0; s < n; ++s) {
    p.address_[s] = address_of(t[s]);
    if (p.slots_[s].source != Source::fixed) t[s] = Tensor();
  }
  // The library calls run one after another: their scratch memory is one block, shared (it
  // stays warm in the caches from one call to the next, as the allocator's reused blocks do).
  size_t scratch = 0;
  for (const Step& s : p.steps_)
    if (s.library) scratch = std::max(scratch, s.library->scratch_bytes());
  if (scratch > 0) {
    p.scratch_ = std::make_shared<Storage>(scratch, Device::cpu());
    for (Step& s : p.steps_)
      if (s.library) s.library->bind_scratch(static_cast<char*>(p.scratch_->data()));
  }
  p.summary_.scratch_bytes = scratch;
  p.operands_.reserve(operands.capacity());
  return sp;
}

void StaticPlan::bind(std::span<const Tensor> inputs) {
  for (auto [s, k] : plan_.inputs()) {
    KILN_ASSERT(k < inputs.size() && inputs[k].defined(), "static plan: input ", k, " unbound");
    address_[s] = address_of(inputs[k]);
    if (slots_[s].needs_tensor) tensors_[s] = inputs[k];
  }
  for (size_t s : in_place_) { // results computed into an input's buffer
    const Tensor& in = inputs[slots_[s].input];
    address_[s] = address_of(in);
    if (slots_[s].needs_tensor) tensors_[s] = in;
  }
}

void StaticPlan::fresh(size_t s) {
  Slot& slot = slots_[s];
  if (slot.source != Source::fresh) return;
  // The geometry is known, so nothing is inferred (which would allocate on its own).
  tensors_[s] = empty_with_layout(slot.sizes, slot.strides, slot.dtype);
  address_[s] = address_of(tensors_[s]);
}

void StaticPlan::fill(Step& s) {
  const Plan::Step& st = *s.step;
  size_t i = 0;
  for (size_t o : st.operands)
    s.buffers[i++] = address_[o];
  for (size_t r : st.results)
    s.buffers[i++] = address_[r];
}

void StaticPlan::run_eager(const Step& s) {
  const Plan::Step& st = *s.step;
  operands_.clear();
  for (size_t o : st.operands)
    operands_.push_back(tensors_[o]);
  if (st.attention) {
    st.attention->run(plan_.kernels()[static_cast<size_t>(st.attention->kernel)], operands_,
                      tensors_[st.results[0]]);
    return;
  }
  if (st.epilogue) {
    const size_t r = st.results[0];
    Tensor out = tensors_[r];
    run_with_epilogue(st.op, *st.attrs, operands_, *st.epilogue, &out);
    return;
  }
  std::vector<Tensor> r = dispatch(st.op, operands_, *st.attrs);
  for (size_t k = 0; k < st.results.size(); ++k) {
    address_[st.results[k]] = address_of(r[k]);
    tensors_[st.results[k]] = std::move(r[k]);
  }
}

Tensor StaticPlan::view_of(const Plan::Step& st) const {
  const Slot& view = slots_[st.results[0]];
  const Tensor& base = tensors_[view.base];
  // A view that autograd must see goes through dispatch (it records the view's backward).
  if (base.requires_grad()) return dispatch1(st.op, {base}, *st.attrs);
  return make_view(base, view.sizes, view.strides,
                   base.impl().offset + view.delta / static_cast<ptrdiff_t>(itemsize(view.dtype)));
}

void StaticPlan::launch() {
  const bool time = options_.time;
  for (Step& s : steps_) {
    const Plan::Step& st = *s.step;
    switch (s.kind) {
    case Kind::kernel: {
      for (size_t r : st.results)
        fresh(r);
      fill(s);
      if (s.skip) break;
      const Clock::time_point t0 = time ? Clock::now() : Clock::time_point{};
      plan_.kernels()[static_cast<size_t>(st.kernel)].run(s.buffers.data());
      if (time) timings_.generated_ns += ns_since(t0);
      break;
    }
    case Kind::library: {
      fresh(st.results[0]);
      fill(s);
      const Clock::time_point t0 = time ? Clock::now() : Clock::time_point{};
      s.library->run(s.buffers);
      if (time) timings_.library_ns += ns_since(t0);
      break;
    }
    case Kind::view: {
      const size_t r = st.results[0];
      const Slot& slot = slots_[r];
      if (slot.source == Source::fixed) break;
      char* base = address_[slot.base];
      address_[r] = base == nullptr ? nullptr : base + slot.delta;
      if (slot.needs_tensor) tensors_[r] = view_of(st);
      break;
    }
    case Kind::eager: {
      if (st.epilogue || st.attention) fresh(st.results[0]);
      const Clock::time_point t0 = time ? Clock::now() : Clock::time_point{};
      run_eager(s);
      if (time) timings_.eager_ns += ns_since(t0);
      break;
    }
    }
    for (size_t r : st.release)
      if (slots_[r].source != Source::fixed && !slots_[r].viewed) tensors_[r] = Tensor();
  }
}

std::vector<Tensor> StaticPlan::collect() {
  std::vector<Tensor> out;
  out.reserve(plan_.outputs().size());
  for (size_t s : plan_.outputs())
    out.push_back(tensors_[s]);
  if (!plan_.writes().empty()) plan_.apply_writes(tensors_);
  // Nothing of this run is kept: the caller's inputs and fresh results belong to the caller.
  for (size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].source != Source::fixed && tensors_[s].defined()) tensors_[s] = Tensor();
  return out;
}

std::vector<Tensor> StaticPlan::run(std::span<const Tensor> inputs) {
  TracerScope untraced(nullptr);
  const Clock::time_point t0 = options_.time ? Clock::now() : Clock::time_point{};
  bind(inputs);
  launch();
  std::vector<Tensor> out = collect();
  if (options_.time) {
    timings_.total_ns += ns_since(t0);
    timings_.kernels_ns = timings_.generated_ns + timings_.library_ns + timings_.eager_ns;
    ++timings_.runs;
  }
  return out;
}

} // namespace kiln
