// TraceSession: recording ops, functionalising in-place writes, and cutting at breaks.
//
// Every tensor the traced code sees has an origin: a Base (the functional "storage": its
// current value in the pending graph, and for a graph input, the input its writes go to) and
// the view steps that lead from the base to the tensor. Reading a tensor re-derives its value
// from its base when the base was written since; writing a tensor replaces the base's value
// (a whole-base write) or scatters the written elements into it (a write through a view).
#include "frontend/trace.h"

#include <atomic>
#include <iostream>
#include <unordered_set>

#include "frontend/freeze.h"
#include "ir/printer.h"
#include "passes/partition.h"
#include "runtime/autograd/autograd.h"
#include "runtime/autograd/node.h"
#include "runtime/error.h"
#include "runtime/grad_mode.h"
#include "runtime/ops.h"
#include "runtime/ops/dispatch.h"
#include "runtime/shape.h"

namespace kiln::frontend {

using Steps = std::vector<std::pair<Op, Attrs>>;

struct TraceSession::Base {
  ir::Value* value = nullptr; // current value in the pending graph
  uint64_t version = 0;       // writes recorded so far
  ir::Value* input = nullptr; // the graph input it stands for (null for a node result)
  size_t input_index = 0;
  Tensor bound; // the concrete tensor bound to `input`
};

struct TraceSession::Handle final : TraceHandle {
  uint64_t session = 0; // TraceSession::id_: never reused, unlike an address
  int64_t segment = 0;
  std::shared_ptr<Base> base;
  Steps steps;
  ir::Value* value = nullptr;
  uint64_t seen = 0; // base->version when value was derived
};

struct TraceSession::Segment {
  explicit Segment(int64_t i)
      : id(i), graph(std::make_unique<ir::Graph>("graph" + std::to_string(i))) {}
  int64_t id;
  std::unique_ptr<ir::Graph> graph;
  std::vector<InputBinding> bindings; // per graph input
  std::vector<Tensor> bound;          // per graph input (undefined for constants)
  std::vector<std::weak_ptr<TensorImpl>> traced;
  std::unordered_map<const TensorImpl*, std::shared_ptr<Base>> captured;
  std::vector<std::shared_ptr<Base>> writable; // bases that are graph inputs
  int64_t nodes = 0;
};

namespace {

constexpr BreakCode kCodes[] = {
    {"KB001", "item", "Tensor::item() reads a tensor's value on the host",
     "keep the value a 0-d tensor and use tensor ops (kiln::where, clamp, maximum) instead of "
     "host arithmetic, or read it outside the compiled function"},
    {"KB002", "to_vector", "Tensor::to_vector() copies a tensor's data to the host",
     "return the tensor from the compiled function and read it outside"},
    {"KB003", "condition",
     "a tensor used as a condition (if (t), while, a ? b : c) needs its value on the host",
     "compute both branches and select with kiln::where(cond, a, b), or decide outside the "
     "compiled function"},
    {"KB004", "print", "printing a tensor (operator<<) needs its data",
     "print outside the compiled function, or set KILN_LOGS=graph to see the traced graph"},
    {"KB005", "data_pointer", "data_ptr()/raw_data() hands a tensor's memory to host code",
     "express the computation with tensor ops, or put the host code in kiln::eager_region"},
    {"KB006", "nonzero", "nonzero's output shape depends on the data",
     "keep shapes fixed: use the mask itself with kiln::where or masked_fill instead of "
     "selecting indices"},
    {"KB007", "masked_select",
     "boolean-mask selection (masked_select) has an output shape that depends on the data",
     "keep the shape: kiln::where(mask, x, 0) or masked_fill, then reduce"},
    {"KB008", "graph_break", "kiln::graph_break() was called",
     "remove the call to capture one graph"},
    {"KB009", "eager_region", "kiln::eager_region(...) runs its block eagerly",
     "move the block out of the compiled function, or express it with tensor ops"},
    {"KB010", "host_state",
     "host state that a replay could not reproduce changes here (an optimizer's learning "
     "rate set by set_lr or an LR scheduler's step)",
     "call the scheduler's step() (or set_lr) outside the compiled function: the compiled "
     "step reads the current rate on every call"},
};

void materialize(TensorImpl& impl, const Tensor& r) {
  const TensorImpl& src = r.impl();
  KILN_ASSERT(src.sizes == impl.sizes && src.dtype == impl.dtype, "materialised ",
              shape_str(src.sizes), " ", src.dtype, " into a traced ", shape_str(impl.sizes), " ",
              impl.dtype);
  impl.storage = src.storage;
  impl.strides = src.strides;
  impl.offset = src.offset;
  impl.trace = nullptr;
}

/// v's number among g's outputs: made an output the first time (`numbers` remembers).
int64_t output_number(ir::Graph& g, std::unordered_map<ir::Value*, int64_t>& numbers,
                      ir::Value* v) {
  auto [it, fresh] = numbers.try_emplace(v, static_cast<int64_t>(g.num_outputs()));
  if (fresh) g.add_output(v);
  return it->second;
}

} // namespace

const BreakCode& break_code(HostRead why) { return kCodes[static_cast<size_t>(why)]; }

namespace {
std::atomic<uint64_t> g_next_session{1};
}

TraceSession::TraceSession(Options options, CompileGraphFn compile, nn::Module* module)
    : options_(options), compile_(std::move(compile)), id_(g_next_session.fetch_add(1)) {
  if (module != nullptr) {
    for (auto& [name, p] : module->named_parameters())
      names_[p.impl_ptr().get()] = name;
    for (auto& [name, b] : module->named_buffers())
      names_[b.impl_ptr().get()] = name;
    for (auto& [name, m] : module->named_modules())
      module_names_[m] = name.empty() ? "<root>" : name;
  }
}

TraceSession::~TraceSession() = default;

TraceSession::Segment& TraceSession::segment() {
  if (!seg_) seg_ = std::make_unique<Segment>(next_segment_++);
  return *seg_;
}

Tensor TraceSession::make_traced(ir::Value* v, std::shared_ptr<Base> base, Steps steps) {
  auto impl = std::make_shared<TensorImpl>();
  const ir::Type& t = v->type();
  impl->sizes = t.sizes();
  impl->strides = t.full_strides();
  impl->dtype = t.dtype();
  impl->device = t.device();
  auto h = std::make_shared<Handle>();
  h->session = id_;
  h->segment = segment().id;
  h->seen = base->version;
  h->base = std::move(base);
  h->steps = std::move(steps);
  h->value = v;
  impl->trace = std::move(h);
  segment().traced.push_back(impl);
  return Tensor(std::move(impl));
}

std::vector<Tensor> TraceSession::begin(std::span<const Tensor> args) {
  first_node_ = autograd::new_sequence();
  Segment& s = segment();
  num_args_ = args.size();
  std::vector<Tensor> traced;
  for (size_t k = 0; k < args.size(); ++k) {
    const Tensor& a = args[k];
    KILN_CHECK(a.defined(), "kiln::compile: tensor argument ", k, " is undefined");
    KILN_CHECK(!a.is_traced(), "kiln::compile: tensor argument ", k,
               " is a traced tensor from another compiled call");
    ir::Value* in = s.graph->add_input(ir::Type::from_meta(TensorMeta::of(a)), ir::InputKind::user,
                                       "arg" + std::to_string(k));
    s.bindings.push_back({InputBinding::Kind::argument, k, nullptr, in->name()});
    s.bound.push_back(a);
    auto base = std::make_shared<Base>(Base{in, 0, in, s.bound.size() - 1, a});
    s.writable.push_back(base);
    Tensor t = make_traced(in, base, {});
    t.impl().requires_grad = a.requires_grad();
    t.impl().grad = a.impl().grad; // the stand-in's slot is the argument's (GradSlotRef)
    standins_[t.impl_ptr().get()] = k;
    traced.push_back(std::move(t));
  }
  args_.assign(args.begin(), args.end());
  return traced;
}

std::shared_ptr<TraceSession::Base> TraceSession::capture(const Tensor& t) {
  Segment& s = segment();
  const TensorImpl* key = t.impl_ptr().get();
  if (auto it = s.captured.find(key); it != s.captured.end()) return it->second;
  auto name = names_.find(key);
  ir::Value* in =
      s.graph->add_input(ir::Type::from_meta(TensorMeta::of(t)), ir::InputKind::parameter,
                         name != names_.end() ? name->second : "");
  if (auto g = grad_values_.find(key); g != grad_values_.end()) {
    // A gradient read from its slot: a replay binds what the slot then holds.
    GradSlot& slot = grad_slots_[g->second];
    slot.bound = true;
    s.bindings.push_back({InputBinding::Kind::grad, slot.ref.argument, slot.ref.leaf, in->name()});
  } else {
    s.bindings.push_back({InputBinding::Kind::captured, 0, t.impl_ptr(), in->name()});
  }
  s.bound.push_back(t);
  auto base = std::make_shared<Base>(Base{in, 0, in, s.bound.size() - 1, t});
  s.captured.emplace(key, base);
  s.writable.push_back(base);
  return base;
}

ir::Value* TraceSession::current(Handle& h) {
  if (h.seen == h.base->version) return h.value;
  ir::Value* v = h.base->value;
  for (const auto& [op, attrs] : h.steps)
    v = emit(op, {v}, attrs);
  h.value = v;
  h.seen = h.base->version;
  return v;
}

TraceSession::Handle* TraceSession::handle_of(const TensorImpl& impl) {
  if (impl.trace == nullptr) return nullptr;
  auto* h = dynamic_cast<Handle*>(impl.trace.get());
  KILN_CHECK(h != nullptr && h->session == id_ && h->segment == segment().id,
             "kiln::compile: a traced tensor from another compiled call (or kept from an "
             "earlier one) was used; return tensors from the compiled function instead");
  return h;
}

ir::Value* TraceSession::value_of(const Tensor& t) {
  const TensorImpl& impl = t.impl();
  if (Handle* h = handle_of(impl)) return current(*h);
  if (impl.wrapped_number) {
    Segment& s = segment();
    TracerScope untraced(nullptr); // the constant's copy is made eagerly
    ir::Value* c = s.graph->add_constant(t, /*wrapped_number=*/true);
    s.bindings.push_back({InputBinding::Kind::constant, 0, nullptr, ""});
    s.bound.emplace_back();
    return c;
  }
  return capture(t)->value;
}

std::shared_ptr<TraceSession::Base> TraceSession::origin(const Tensor& t, Steps* steps) {
  const TensorImpl& impl = t.impl();
  if (Handle* h = handle_of(impl)) {
    if (steps) *steps = h->steps;
    return h->base;
  }
  KILN_CHECK(!impl.wrapped_number, "kiln::compile: a scalar operand can't be written in place");
  if (steps) steps->clear();
  return capture(t);
}

ir::Value* TraceSession::emit(Op op, std::vector<ir::Value*> inputs, Attrs attrs) {
  const OpSchema& s = schema(op);
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const ir::Value* v : inputs)
    metas.push_back(v->type().to_meta());
  std::vector<TensorMeta> results = s.infer(metas, attrs);
  std::vector<ir::Type> types;
  types.reserve(results.size());
  for (const TensorMeta& m : results)
    types.push_back(ir::Type::from_meta(m));
  Segment& seg = segment();
  ir::Node* n = seg.graph->create_node(op, std::move(inputs), std::move(attrs), types);
  if (options_.record_locations) n->set_location(user_call_site());
  ++seg.nodes;
  ++ops_;
  return n->output(0);
}

std::vector<Tensor> TraceSession::record(Op op, std::span<const Tensor> inputs, const Attrs& attrs,
                                         std::span<Tensor> out) {
  const OpSchema& s = schema(op);
  check_call(s, inputs, attrs);
  KILN_ASSERT(s.num_outputs == 1, s.name, ": multi-result ops are not traced yet");
  std::vector<ir::Value*> values;
  values.reserve(inputs.size());
  for (const Tensor& t : inputs)
    values.push_back(value_of(t));
  ir::Value* in0 = values.empty() ? nullptr : values[0];
  ir::Value* r = emit(op, std::move(values), attrs);
  if (!out.empty()) {
    KILN_ASSERT(out.size() == 1, "out= count mismatch");
    write(op, out[0], r);
    return {out[0]};
  }
  if (s.kind == OpKind::view) {
    Steps steps;
    std::shared_ptr<Base> base = origin(inputs[0], &steps);
    if (r->type() != in0->type()) steps.emplace_back(op, attrs); // identity views add no step
    Tensor t = make_traced(r, std::move(base), std::move(steps));
    // The view's strides as eager code has them, from the input tensor's own: a tensor
    // written in place keeps its layout, while the value that stands for it now (the op's
    // result) is contiguous. Code that asks is_contiguous() or reshapes the view must
    // decide as it does eagerly (copy or alias), or a later write could reach the input.
    std::vector<TensorMeta> metas;
    metas.reserve(inputs.size());
    for (const Tensor& in : inputs)
      metas.push_back(TensorMeta::of(in));
    const TensorMeta eager = s.infer(metas, attrs).at(0);
    t.impl().strides = eager.strides.empty() ? contiguous_strides(eager.sizes) : eager.strides;
    return {t};
  }
  return {make_traced(r, std::make_shared<Base>(Base{r, 0, nullptr, 0, Tensor()}), {})};
}

void TraceSession::write(Op op, Tensor& self, ir::Value* r) {
  const ir::Type& rt = r->type();
  check_out(schema(op), rt.sizes(), rt.dtype(), self);
  if (rt.dtype() != self.dtype()) r = emit(Op::cast, {r}, Attrs{self.dtype()});
  Steps steps;
  std::shared_ptr<Base> base = origin(self, &steps);
  base->value = steps.empty() ? r : merge(*base, steps, r);
  ++base->version;
  if (Handle* h = handle_of(self.impl())) {
    h->value = r;
    h->seen = base->version;
  }
}

ir::Value* TraceSession::merge(Base& base, const Steps& steps, ir::Value* r) {
  // The flat index of each element of the view, by the same view steps applied to an iota of
  // the base; then one scatter puts r's elements at those places.
  const ir::Type bt = base.value->type();
  const int64_t n = bt.numel();
  const int64_t m = r->type().numel();
  ir::Value* idx = emit(Op::arange, {}, Attrs{Scalar(0), Scalar(n), Scalar(1), DType::i64});
  idx = emit(Op::view, {idx}, Attrs{bt.sizes()});
  for (const auto& [op, attrs] : steps)
    idx = emit(op, {idx}, attrs);
  idx = emit(Op::view, {emit(Op::copy, {idx}, {})}, Attrs{Shape{m}});
  ir::Value* src = emit(Op::view, {emit(Op::copy, {r}, {})}, Attrs{Shape{m}});
  ir::Value* flat = bt.is_contiguous() ? base.value : emit(Op::copy, {base.value}, {});
  flat = emit(Op::view, {flat}, Attrs{Shape{n}});
  ir::Value* merged = emit(Op::scatter, {flat, idx, src}, Attrs{int64_t{0}});
  return emit(Op::view, {merged}, Attrs{bt.sizes()});
}

bool TraceSession::pending(const TensorImpl& impl) {
  if (!seg_) return false;
  for (const auto& b : seg_->writable)
    if (b->version > 0 && b->bound.impl().storage != nullptr &&
        b->bound.impl().storage == impl.storage)
      return true;
  return false;
}

TraceSession::GradSlot* TraceSession::slot_of(const Tensor& t) {
  const TensorImpl* key = t.impl_ptr().get();
  if (auto it = slot_index_.find(key); it != slot_index_.end()) return &grad_slots_[it->second];
  GradSlotRef ref;
  if (auto arg = standins_.find(key); arg != standins_.end()) {
    ref.argument = arg->second;
    ref.name = "argument " + std::to_string(arg->second);
  } else if (t.is_traced()) {
    return nullptr; // a tensor made by the traced code: its slot lives and dies with it
  } else {
    ref.leaf = t.impl_ptr();
    auto name = names_.find(key);
    ref.name = name != names_.end() ? name->second : "<unnamed>";
  }
  slot_index_[key] = grad_slots_.size();
  grad_slots_.push_back({std::move(ref), t.impl().grad, nullptr, false, false});
  return &grad_slots_.back();
}

void TraceSession::grad_slot(const Tensor& t, bool write) {
  GradSlot* slot = slot_of(t);
  if (slot == nullptr) return;
  if (write) {
    slot->written = true;
    return;
  }
  if (slot->written || slot->read_first) return;
  slot->read_first = true;
  const std::shared_ptr<TensorImpl>& g = t.impl().grad;
  if (g && !g->is_traced()) grad_values_[g.get()] = static_cast<size_t>(slot - grad_slots_.data());
}

void TraceSession::track(const std::shared_ptr<TensorImpl>& impl) {
  if (handle_of(*impl) != nullptr) segment().traced.push_back(impl);
}

uint64_t TraceSession::version(const TensorImpl& t) {
  if (Handle* h = handle_of(t)) return h->base->version;
  uint64_t v = t.storage ? t.storage->version() : 0;
  if (seg_ && t.storage)
    for (const auto& b : seg_->writable)
      if (b->bound.impl().storage == t.storage) v += b->version;
  return v;
}

bool TraceSession::aliases(const TensorImpl& a, const TensorImpl& b) {
  // A traced tensor's memory is its base's: a graph input's is the bound tensor's storage.
  auto memory = [&](const TensorImpl& t) -> const void* {
    if (Handle* h = handle_of(t))
      return h->base->bound.defined()
                 ? static_cast<const void*>(h->base->bound.impl().storage.get())
                 : h->base.get();
    return t.storage.get();
  };
  const void* m = memory(a);
  return m != nullptr && m == memory(b);
}

int64_t TraceSession::segment_id() { return segment().id; }

void TraceSession::module_mode_read(const nn::Module& m, const std::shared_ptr<const bool>& flag) {
  for (const ModeReadGuard& g : mode_reads_)
    if (g.flag == flag) return;
  auto name = module_names_.find(&m);
  mode_reads_.push_back({flag, *flag, name != module_names_.end() ? name->second : m.name()});
}

void TraceSession::host_read(const Tensor* t, HostRead why) {
  bool must_break = why == HostRead::explicit_break || why == HostRead::eager_region ||
                    why == HostRead::host_state;
  std::string what;
  if (t != nullptr && t->defined()) {
    const TensorImpl& impl = t->impl();
    if (impl.is_traced() || pending(impl)) {
      must_break = true;
      what = " (a " + ir::Type::from_meta(TensorMeta::of(*t)).str() + " tensor)";
    } else if (!impl.wrapped_number && impl.storage != nullptr) {
      // The trace now depends on this tensor's data: replays must check it is unchanged.
      auto name = names_.find(&impl);
      host_reads_.push_back(
          {t->impl_ptr(), t->version(), name != names_.end() ? name->second : std::string()});
    }
  }
  if (!must_break) return;
  const BreakCode& c = break_code(why);
  breaks_.push_back({std::string(c.code), std::string(c.reason) + what, "", std::string(c.hint),
                     static_cast<int64_t>(graphs_.size())});
  break_stacks_.push_back(capture_call_stack());
  if (options_.log_breaks || options_.fullgraph) {
    const GraphBreak& b = breaks().back();
    if (options_.log_breaks) std::cerr << "[kiln graph_breaks] " << b.str() << "\n";
    if (options_.fullgraph)
      throw Error("graph break in a fullgraph compile: " + b.str() + "; see docs/graph-breaks.md#" +
                  std::string(c.code));
  }
  cut(nullptr);
}

const std::vector<GraphBreak>& TraceSession::breaks() const {
  for (size_t k = 0; k < break_stacks_.size(); ++k)
    if (!break_stacks_[k].pcs.empty()) {
      breaks_[k].location = user_call_site(break_stacks_[k]);
      break_stacks_[k].pcs.clear();
    }
  return breaks_;
}

void TraceSession::cut(std::vector<Tensor>* results) {
  TracerScope untraced(nullptr); // compiling (constant folding) and running are eager
  // The graph's run is not recorded: the autograd history of what it computes was recorded
  // while tracing (and its writes into parameters are the traced code's own).
  const NoGradGuard no_grad;
  Segment& s = segment();
  ir::Graph& g = *s.graph;
  // How each tensor that outlives the graph becomes concrete: as a graph output; as a view
  // of a written input taken after the writes (so it aliases the input, as in eager code);
  // or, for a concrete tensor, as it is.
  struct Plan {
    std::shared_ptr<TensorImpl> impl;
    int64_t output = -1;
    std::shared_ptr<Base> alias; // the written input base
    Steps steps;
  };
  std::unordered_map<ir::Value*, int64_t> out_index;
  auto plan = [&](const std::shared_ptr<TensorImpl>& impl) {
    Plan p{impl, -1, nullptr, {}};
    Handle* h = handle_of(*impl);
    if (h == nullptr) return p;
    if (h->base->input != nullptr && h->base->version > 0) {
      p.alias = h->base;
      p.steps = h->steps;
      return p;
    }
    p.output = output_number(g, out_index, current(*h));
    return p;
  };
  std::vector<Plan> result_plans, plans;
  if (results != nullptr)
    for (const Tensor& r : *results) {
      KILN_CHECK(r.defined(), "kiln::compile: the compiled function returned an undefined tensor");
      result_plans.push_back(plan(r.impl_ptr()));
    }
  // At the end of the call: what each gradient slot the code wrote holds now (a replay sets
  // it), and whether any other traced tensor outlives the call (kept by host state a replay
  // could not update, such as an optimizer's state made at its first step): then the call
  // has no replay, and the next one is traced again.
  bool replayable = results != nullptr && breaks_.empty();
  std::vector<TraceSession::Replay::GradWrite> grad_writes;
  std::unordered_set<const TensorImpl*> accounted;
  if (results != nullptr) {
    for (const Tensor& r : *results)
      accounted.insert(r.impl_ptr().get());
    for (GradSlot& slot : grad_slots_) {
      if (!slot.written) continue;
      std::shared_ptr<TensorImpl> now = slot.ref.leaf ? slot.ref.leaf->grad : slot.last;
      if (now == slot.initial) continue; // left as it was (or written in place)
      grad_writes.push_back({slot.ref, -1, slot.bound});
      if (!now) continue;
      accounted.insert(now.get());
      const Plan p = plan(now);
      if (p.output >= 0)
        grad_writes.back().output = p.output;
      else
        replayable = false; // a concrete tensor, or a view of a written input
    }
  }
  // With a compiled backward: which saved tensors the forward keeps, and which the backward
  // computes again (those are no outputs).
  std::unordered_set<const TensorImpl*> recomputed;
  if (saved_ != nullptr) recomputed = partition_saved(s, out_index);
  for (const auto& w : s.traced)
    if (auto impl = w.lock()) {
      if (recomputed.count(impl.get()) != 0) continue;
      plans.push_back(plan(impl));
      if (saved_ != nullptr && saved_->count(impl.get()) != 0) {
        // Read by the compiled backward: a forward output (not a view of a written input).
        saved_ok_ = saved_ok_ && plans.back().output >= 0;
        continue;
      }
      // (An argument's stand-in is kept by the autograd leaf it is: it is the argument.)
      if (results != nullptr && accounted.count(impl.get()) == 0 &&
          standins_.count(impl.get()) == 0)
        replayable = false;
    }
  for (const auto& b : s.writable) {
    if (b->version == 0) continue;
    for (size_t i = 0; i < s.bound.size(); ++i) {
      if (i == b->input_index || !s.bound[i].defined()) continue;
      KILN_CHECK(s.bound[i].impl().storage != b->bound.impl().storage,
                 "kiln::compile: the compiled code writes in place to a tensor of shape ",
                 shape_str(b->bound.sizes()),
                 " that shares memory with another tensor it reads (shape ",
                 shape_str(s.bound[i].sizes()), "); clone() one of them first");
    }
    g.add_write(b->input, b->value);
  }

  std::shared_ptr<const codegen::CompiledGraph> exe;
  std::vector<Tensor> outs;
  if (s.nodes > 0 || !g.writes().empty()) {
    GraphInfo info{s.nodes,
                   static_cast<int64_t>(g.num_inputs()),
                   static_cast<int64_t>(g.num_outputs()),
                   {},
                   {},
                   {},
                   {}};
    // Folded first, so that explain() and dumps show the graph that is compiled.
    if (options_.freeze) {
      conv_folds_ += fold_conv_affine(g, s.bound, host_reads_);
      // The folded weights are constant inputs: bound, like every constant, to nothing.
      while (s.bound.size() < g.num_inputs()) {
        s.bindings.push_back({InputBinding::Kind::constant, 0, nullptr, ""});
        s.bound.emplace_back();
      }
    }
    if (options_.keep_ir) info.ir = ir::print(g);
    exe = compile_(g);
    info.fallback = exe->fallback;
    info.layout = exe->layout.log;
    info.attention = exe->attention_log;
    graphs_.push_back(std::move(info));
    outs = exe->run(s.bound);
    kernels_ += exe->launches;
    if (saved_ != nullptr) forward_outs_ = outs;
  } else {
    for (ir::Value* v : g.outputs()) // a graph without nodes only forwards its inputs
      outs.push_back(s.bound[v->index()]);
  }
  for (Recompute::Step& st : recompute_.steps)
    for (Recompute::Operand& o : st.operands)
      if (o.output >= 0) o.tensor = outs.at(static_cast<size_t>(o.output));
  {
    for (std::vector<Plan>* ps : {&result_plans, &plans})
      for (Plan& p : *ps) {
        if (p.output >= 0) {
          materialize(*p.impl, outs[static_cast<size_t>(p.output)]);
        } else if (p.alias) {
          Tensor v = p.alias->bound;
          for (const auto& [op, attrs] : p.steps)
            v = dispatch1(op, std::span<const Tensor>(&v, 1), attrs);
          materialize(*p.impl, v);
        }
      }
  }
  if (replayable) {
    auto r = std::make_shared<Replay>();
    for (const GradSlot& slot : grad_slots_)
      if (slot.read_first)
        r->grad_reads.push_back(
            {slot.ref, slot.initial != nullptr,
             slot.initial ? TensorMeta::of(Tensor(slot.initial)) : TensorMeta{}});
    r->grad_writes = std::move(grad_writes);
    r->compiled = exe;
    r->bindings = s.bindings;
    for (size_t k = 0; k < result_plans.size(); ++k) {
      const Plan& p = result_plans[k];
      r->result_outputs.push_back(p.output);
      r->fixed.push_back(p.output < 0 && !p.alias ? (*results)[k] : Tensor());
      r->result_input.push_back(p.alias ? static_cast<int64_t>(p.alias->input_index) : -1);
      r->result_steps.push_back(p.steps);
    }
    if (!exe) r->forwarded.assign(g.outputs().size(), 0);
    for (size_t k = 0; !exe && k < g.num_outputs(); ++k)
      r->forwarded[k] = g.output(k)->index();
    replay_ = std::move(r);
  }
  seg_.reset();
}

std::unordered_set<const TensorImpl*>
TraceSession::partition_saved(Segment& s, std::unordered_map<ir::Value*, int64_t>& out_index) {
  ir::Graph& g = *s.graph;
  std::vector<std::pair<std::shared_ptr<TensorImpl>, ir::Value*>> saved;
  for (const auto& w : s.traced)
    if (auto impl = w.lock(); impl && saved_->count(impl.get()) != 0) {
      Handle* h = handle_of(*impl);
      // A view of a written input is materialised after the writes: left as it is.
      if (h == nullptr || (h->base->input != nullptr && h->base->version > 0)) return {};
      saved.emplace_back(impl, current(*h));
    }
  std::vector<const ir::Value*> needed, free(g.outputs().begin(), g.outputs().end());
  for (const auto& [impl, v] : saved)
    needed.push_back(v);
  const passes::SavePartition p = passes::partition_for_backward(g, needed, free);
  if (!options_.recompute || p.recompute.empty()) {
    backward_memory_ = {p.needed_bytes, p.needed_bytes, 0};
    return {};
  }
  backward_memory_ = {p.needed_bytes, p.saved_bytes, static_cast<int64_t>(p.recompute.size())};
  std::unordered_map<const ir::Node*, int64_t> step_of;
  for (const ir::Node* n : p.recompute) {
    Recompute::Step st{n->op(), n->attrs(), {}};
    for (const ir::Value* u : n->inputs()) {
      Recompute::Operand o;
      if (auto it = u->producer() ? step_of.find(u->producer()) : step_of.end();
          it != step_of.end())
        o.step = it->second;
      else if (u->is_constant())
        o.tensor = u->constant();
      else if (u->is_input() && s.bindings.at(u->index()).kind == InputBinding::Kind::captured)
        o.tensor = s.bound.at(u->index()); // a parameter (bound by identity): read as it is
      else
        o.output = output_number(g, out_index, const_cast<ir::Value*>(u)); // kept: an output
      st.operands.push_back(std::move(o));
    }
    step_of[n] = static_cast<int64_t>(recompute_.steps.size());
    recompute_.steps.push_back(std::move(st));
  }
  std::unordered_set<const TensorImpl*> recomputed;
  for (const auto& [impl, v] : saved)
    if (auto it = v->producer() ? step_of.find(v->producer()) : step_of.end();
        it != step_of.end()) {
      recompute_.targets.emplace_back(impl, static_cast<size_t>(it->second));
      recomputed.insert(impl.get());
    }
  return recomputed;
}

std::vector<Tensor> TraceSession::trace_call(std::span<const Tensor> args,
                                             const CompiledFunction::Body& body) {
  std::vector<Tensor> traced = begin(args);
  std::vector<Tensor> results;
  {
    TracerScope scope(this);
    results = body(traced);
  }
  // The argument stand-ins are not results unless returned; their gradient slots are the
  // arguments'.
  for (GradSlot& slot : grad_slots_)
    if (!slot.ref.leaf) {
      slot.last = traced[slot.ref.argument].impl().grad;
      KILN_CHECK(!slot.written || slot.last == slot.initial || args[slot.ref.argument].is_leaf(),
                 "kiln::compile: backward() inside the compiled function reached tensor argument ",
                 slot.ref.argument,
                 ", which has autograd history from outside it; gradients can't flow out of a "
                 "compiled function yet (detach() the argument, or call backward() outside)");
    }
  traced.clear();
  finish(results);
  return results;
}

void TraceSession::strip_history(std::vector<Tensor>& results) {
  for (Tensor& r : results) {
    if (!r.defined() || r.impl().autograd == nullptr || !r.impl().autograd->grad_fn) continue;
    if (r.impl().autograd->grad_fn->sequence < first_node_) continue; // not from this trace
    r.impl().autograd = nullptr;
    r.impl().requires_grad = false;
  }
}

bool TraceSession::history_of(const std::vector<Tensor>& results, const std::vector<bool>& history,
                              std::vector<std::shared_ptr<TensorImpl>>& leaves,
                              std::unordered_set<const TensorImpl*>& saved) {
  std::vector<autograd::Node*> stack;
  std::unordered_set<autograd::Node*> seen;
  for (size_t k = 0; k < results.size(); ++k)
    if (history[k]) {
      autograd::Node* n = results[k].impl().autograd->grad_fn.get();
      if (seen.insert(n).second) stack.push_back(n);
    }
  std::vector<Tensor> kept;
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    if (auto* acc = dynamic_cast<autograd::AccumulateGrad*>(n)) {
      leaves.push_back(acc->leaf());
      continue;
    }
    if (n->sequence < first_node_ || n->released()) return false; // history from before
    kept.clear();
    n->saved(kept);
    for (const Tensor& t : kept)
      if (t.is_traced()) saved.insert(t.impl_ptr().get());
    for (const autograd::Edge& e : n->next)
      if (e.valid() && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  return true;
}

std::shared_ptr<BackwardGraph>
TraceSession::trace_backward(const std::vector<Tensor>& results, const std::vector<bool>& history,
                             const std::vector<std::shared_ptr<TensorImpl>>& leaves) {
  Segment& s = segment();
  const int64_t ops = ops_;
  auto bw = std::make_shared<BackwardGraph>();
  std::vector<Tensor> roots, seeds, inputs;
  for (size_t k = 0; k < results.size(); ++k) {
    if (!history[k]) continue;
    const TensorMeta meta = TensorMeta::of(results[k]);
    ir::Value* in =
        s.graph->add_input(ir::Type::from_meta({meta.dtype, meta.device, meta.sizes, {}, false}),
                           ir::InputKind::user, "grad" + std::to_string(bw->results.size()));
    s.bindings.push_back({InputBinding::Kind::argument, bw->results.size(), nullptr, in->name()});
    s.bound.emplace_back();
    seeds.push_back(make_traced(in, std::make_shared<Base>(Base{in, 0, in, 0, Tensor()}), {}));
    roots.push_back(results[k]);
    bw->results.push_back(meta);
  }
  for (const std::shared_ptr<TensorImpl>& leaf : leaves) {
    inputs.emplace_back(leaf);
    auto arg = standins_.find(leaf.get());
    bw->leaf_tensors.push_back(arg == standins_.end() ? leaf : nullptr);
    bw->leaf_arguments.push_back(arg == standins_.end() ? 0 : arg->second);
  }
  std::vector<Tensor> grads;
  {
    TracerScope traced(this);
    if (!recompute_.steps.empty()) {
      // The saved tensors the forward did not keep: computed again here, from what it kept,
      // and read by the formulas as values of this graph.
      const NoGradGuard no_grad;
      std::vector<Tensor> again;
      for (const Recompute::Step& st : recompute_.steps) {
        std::vector<Tensor> in;
        for (const Recompute::Operand& o : st.operands)
          in.push_back(o.step >= 0 ? again.at(static_cast<size_t>(o.step)) : o.tensor);
        again.push_back(dispatch1(st.op, in, st.attrs));
      }
      for (const auto& [impl, k] : recompute_.targets) {
        KILN_ASSERT(impl->sizes == again[k].sizes() && impl->dtype == again[k].dtype(),
                    "compiled backward: a recomputed saved tensor changed type");
        impl->strides = again[k].strides();
        impl->trace = again[k].impl().trace;
      }
      recompute_ = {};
    }
    grads = autograd::grad(roots, inputs, seeds, /*retain_graph=*/false, /*create_graph=*/false,
                           /*allow_unused=*/true);
  }
  ops_ = ops; // the forward's count: the backward runs on its own
  ir::Graph& g = *s.graph;
  bool ok = g.writes().empty();
  std::unordered_map<ir::Value*, int64_t> out_index;
  for (const Tensor& grad : grads) {
    if (!grad.defined()) {
      bw->leaf_outputs.push_back(-1);
      continue;
    }
    Handle* h = handle_of(grad.impl());
    ok = ok && h != nullptr;
    if (!ok) break;
    bw->leaf_outputs.push_back(output_number(g, out_index, current(*h)));
  }
  // The saved tensors it read are outputs of the forward's run (same views of them).
  for (InputBinding& b : s.bindings) {
    if (b.kind != InputBinding::Kind::captured) continue;
    const Tensor t(b.captured);
    for (size_t k = 0; k < forward_outs_.size(); ++k)
      if (forward_outs_[k].defined() && same_view(forward_outs_[k], t)) {
        b = {InputBinding::Kind::saved, k, nullptr, b.name};
        break;
      }
  }
  if (ok) {
    bw->bindings = s.bindings;
    if (s.nodes > 0) {
      TracerScope untraced(nullptr);
      const NoGradGuard no_grad;
      bw->compiled = compile_(g);
    } else {
      for (ir::Value* v : g.outputs())
        bw->forwarded.push_back(v->index());
    }
  }
  seg_.reset();
  return ok ? bw : nullptr;
}

void TraceSession::finish(std::vector<Tensor>& results) {
  Segment& s = segment();
  // A traced view's link to its base (for writes through views) ends with the call: a view
  // kept for the backward would otherwise keep its base, a value no replay makes.
  for (const auto& w : s.traced)
    if (auto impl = w.lock(); impl && impl->autograd) autograd::forget_view_base(*impl->autograd);
  std::vector<bool> history;
  for (const Tensor& r : results)
    history.push_back(r.defined() && r.is_traced() && r.impl().autograd != nullptr &&
                      r.impl().autograd->grad_fn != nullptr);
  std::vector<std::shared_ptr<TensorImpl>> leaves;
  std::unordered_set<const TensorImpl*> saved;
  const bool any = std::find(history.begin(), history.end(), true) != history.end();
  std::shared_ptr<BackwardGraph> bw;
  if (options_.backward && any && breaks_.empty() && history_of(results, history, leaves, saved)) {
    // The forward runs with what its backward reads among its outputs; then the backward is
    // traced from the recorded history, and the history dropped.
    saved_ = &saved;
    saved_ok_ = true;
    cut(&results);
    saved_ = nullptr;
    if (saved_ok_) bw = trace_backward(results, history, leaves);
    strip_history(results);
    if (!bw) replay_.reset(); // the saved tensors were left in the results' history
  } else {
    strip_history(results);
    cut(&results);
  }
  // The gradients the code left in its arguments' slots (now concrete).
  for (const GradSlot& slot : grad_slots_)
    if (!slot.ref.leaf && slot.written) args_[slot.ref.argument].impl().grad = slot.last;
  if (bw) {
    compiled_backward(results, history, bw, forward_outs_, args_);
  } else {
    for (size_t k = 0; k < results.size(); ++k)
      if (history[k]) compiled_history(results[k]);
  }
  forward_outs_.clear();
  if (replay_) {
    replay_->result_history = history;
    replay_->backward = bw;
  }
}

namespace {

/// The backward of a result of a compiled function: not built yet, so it says so.
class CompiledForwardBackward final : public autograd::Node {
public:
  std::vector<Tensor> apply(std::vector<Tensor>) override {
    throw Error::without_location(
        "kiln::compile: backward reached a tensor returned by a compiled function; gradients "
        "through a compiled forward are not built yet. Compile the whole training step "
        "(forward, loss, backward() and the optimizer's step) as one function, or run the "
        "forward eagerly");
  }
  std::string name() const override { return "CompiledFunctionUnbuiltBackward"; }
};

/// The grad_fn of a compiled forward's results: runs the compiled backward on the saved forward
/// outputs, the captured tensors it reads and the results' gradients.
class CompiledBackward final : public autograd::Node {
public:
  explicit CompiledBackward(std::shared_ptr<const BackwardGraph> bw) : bw_(std::move(bw)) {}
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    KILN_CHECK(!released_, "autograd: trying to backward through the graph a second time: the "
                           "compiled forward's saved tensors are gone; pass retain_graph=true to "
                           "the first backward");
    KILN_CHECK(!is_grad_enabled(), "kiln::compile: create_graph (double backward) through a "
                                   "compiled forward is not supported; run the forward eagerly");
    std::vector<Tensor> in(bw_->bindings.size());
    for (size_t k = 0; k < in.size(); ++k) {
      const InputBinding& b = bw_->bindings[k];
      if (b.kind != InputBinding::Kind::argument) {
        in[k] = inputs_[k];
        continue;
      }
      // The graph was traced for contiguous gradients of the results' dtypes.
      const TensorMeta& m = bw_->results.at(b.argument);
      const Tensor& g = grads.at(b.argument);
      in[k] = g.defined() ? g.to(m.dtype).contiguous()
                          : zeros(m.sizes, TensorOptions(m.dtype).device(m.device));
    }
    std::vector<Tensor> outs;
    if (bw_->compiled) {
      outs = bw_->compiled->run(in);
    } else {
      for (size_t i : bw_->forwarded)
        outs.push_back(in[i]);
    }
    std::vector<Tensor> result;
    for (int64_t o : bw_->leaf_outputs)
      result.push_back(o >= 0 ? outs[static_cast<size_t>(o)] : Tensor());
    return result;
  }
  std::string name() const override { return "CompiledFunctionBackward"; }
  void release() override {
    inputs_.clear();
    released_ = true;
  }
  bool released() const override { return released_; }
  void saved(std::vector<Tensor>& out) const override {
    for (const Tensor& t : inputs_)
      if (t.defined()) out.push_back(t);
  }

  std::shared_ptr<const BackwardGraph> bw_;
  std::vector<Tensor> inputs_; // per binding: the saved output or captured tensor
  bool released_ = false;
};

} // namespace

void compiled_backward(std::vector<Tensor>& results, const std::vector<bool>& history,
                       const std::shared_ptr<const BackwardGraph>& backward,
                       std::span<const Tensor> outputs, std::span<const Tensor> args) {
  auto node = std::make_shared<CompiledBackward>(backward);
  node->sequence = autograd::new_sequence();
  for (const InputBinding& b : backward->bindings)
    node->inputs_.push_back(b.kind == InputBinding::Kind::saved      ? outputs[b.argument]
                            : b.kind == InputBinding::Kind::captured ? Tensor(b.captured)
                                                                     : Tensor());
  for (size_t i = 0; i < backward->leaf_outputs.size(); ++i) {
    const Tensor leaf = backward->leaf_tensors[i] ? Tensor(backward->leaf_tensors[i])
                                                  : args[backward->leaf_arguments[i]];
    node->next.push_back(autograd::gradient_edge(leaf));
  }
  node->outputs = backward->results;
  uint32_t nr = 0;
  for (size_t k = 0; k < results.size(); ++k) {
    if (!history[k]) continue;
    autograd::AutogradMeta& m = autograd::meta_of(results[k]);
    m.grad_fn = node;
    m.output_nr = nr++;
    results[k].impl().requires_grad = true;
  }
}

void compiled_history(Tensor& result) {
  if (!is_floating(result.dtype())) return;
  auto node = std::make_shared<CompiledForwardBackward>();
  node->outputs.push_back(TensorMeta::of(result));
  autograd::AutogradMeta& m = autograd::meta_of(result);
  m.grad_fn = std::move(node);
  m.output_nr = 0;
  result.impl().requires_grad = true;
}

} // namespace kiln::frontend

namespace kiln {
std::span<const BreakCode> break_codes() { return frontend::kCodes; }
} // namespace kiln
